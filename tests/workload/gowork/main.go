// A Go test subject for unwinding (tests/integration/test_unwind_go.py):
// goroutines doing different CPU work for SECONDS while the program takes
// its own CPU profile with runtime/pprof, the reference the sensor's stacks
// are compared with.
//
//	gowork PROFILE SECONDS
//
// The work covers the frames a Go unwinder meets: a frameless leaf (leaf
// has no calls, so Go gives it no frame pointer), recursion, closures
// called through sort.Slice, assembly with and without frames
// (crypto/sha256, memmove) and allocation, whose garbage collection runs
// on the system stack.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"time"
)

var sink uint64

//go:noinline
func leaf(n int) uint64 {
	var s uint64
	for i := 0; i < n; i++ {
		s = s*2862933555777941757 + uint64(i)
	}
	return s
}

//go:noinline
func spinner(stop time.Time) {
	for time.Now().Before(stop) {
		sink += leaf(200000)
	}
}

//go:noinline
func recurse(depth int) uint64 {
	if depth == 0 {
		return leaf(50000)
	}
	return recurse(depth-1) + 1
}

//go:noinline
func recursor(stop time.Time) {
	for time.Now().Before(stop) {
		sink += recurse(20)
	}
}

//go:noinline
func sorter(stop time.Time) {
	v := make([]int, 20000)
	for time.Now().Before(stop) {
		for i := range v {
			v[i] = (i * 7919) % 20011
		}
		sort.Slice(v, func(a, b int) bool { return v[a] < v[b] })
	}
}

//go:noinline
func hasher(stop time.Time) {
	buf := make([]byte, 1<<16)
	for time.Now().Before(stop) {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
}

//go:noinline
func allocator(stop time.Time) {
	for time.Now().Before(stop) {
		m := make(map[int][]byte)
		for i := 0; i < 2000; i++ {
			m[i] = make([]byte, 64+i%512)
		}
		sink += uint64(len(m))
	}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gowork PROFILE SECONDS")
		os.Exit(2)
	}
	secs, err := strconv.ParseFloat(os.Args[2], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	f, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var wg sync.WaitGroup
	for _, work := range []func(time.Time){spinner, recursor, sorter, hasher, allocator} {
		wg.Add(1)
		go func(work func(time.Time)) {
			defer wg.Done()
			work(stop)
		}(work)
	}
	wg.Wait()
	pprof.StopCPUProfile()
	f.Close()
	fmt.Println(sink)
}
