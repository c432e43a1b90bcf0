// A Go test subject for unwinding across cgo calls
// (tests/integration/test_unwind_go.py): goroutines that spend their time
// in C functions compiled with gcc -O2 (no frame pointers: the walk needs
// their .eh_frame), called through cgo, which runs C on the thread's g0
// stack (runtime.asmcgocall).
//
//	gocgo SECONDS
package main

/*
#include <stdint.h>

__attribute__((noinline)) uint64_t c_leaf(uint64_t n)
{
	uint64_t s = 0;

	for (uint64_t i = 0; i < n; i++)
		s = s * 2862933555777941757ull + i;
	return s;
}

__attribute__((noinline)) uint64_t c_spin(uint64_t n)
{
	return c_leaf(n) + c_leaf(n / 2);
}
*/
import "C"

import (
	"os"
	"strconv"
	"sync"
	"time"
)

var sink uint64

//go:noinline
func cwork(stop time.Time) {
	for time.Now().Before(stop) {
		sink += uint64(C.c_spin(C.uint64_t(2000000)))
	}
}

func main() {
	secs, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	stop := time.Now().Add(time.Duration(secs) * time.Second)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cwork(stop)
		}()
	}
	wg.Wait()
}
