// A Go test subject for symbolization: a few functions, some inlined,
// built twice by the tests (with DWARF, and stripped with -ldflags=-s -w,
// which leaves only .gopclntab).
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

type point struct{ x, y int }

func square(v int) int { return v * v } // small: inlined

//go:noinline
func distance(a, b point) int {
	return square(a.x-b.x) + square(a.y-b.y)
}

//go:noinline
func closest(ps []point, to point) point {
	best := ps[0]
	for _, p := range ps[1:] {
		if distance(p, to) < distance(best, to) {
			best = p
		}
	}
	return best
}

func words(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, strings.Repeat(string(rune('a'+i%26)), 1+i%5))
	}
	sort.Strings(out)
	return out
}

func main() {
	ps := []point{{1, 2}, {3, 4}, {-1, 7}, {5, -2}}
	fmt.Println(closest(ps, point{0, 0}), len(words(len(os.Args)+100)))
}
