// A CPU-bound Go test subject for profiling through the sensor: main.spin
// loops over an inlined call (main.mix) for as many rounds as its argument.
package main

import (
	"fmt"
	"os"
	"strconv"
)

func mix(v uint64) uint64 { return v*6364136223846793005 + 1442695040888963407 } // inlined

//go:noinline
func spin(n int) uint64 {
	var s uint64
	for i := 0; i < n; i++ {
		s = mix(s ^ uint64(i))
	}
	return s
}

func main() {
	rounds, _ := strconv.Atoi(os.Args[1])
	var t uint64
	for r := 0; r < rounds; r++ {
		t += spin(10000000)
	}
	fmt.Println(t)
}
