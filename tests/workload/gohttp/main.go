// A Go net/http server and client for the Go probe tests
// (tests/integration/test_go_probes.py). Standard library only.
//
//	gohttp server           listen on 127.0.0.1:0, print the port
//	gohttp client URL N     wait for a line on stdin, then make N requests
//	                        over several paths, printing one JSON line each
//	                        with the duration measured around the call
//	gohttp load URL SECONDS requests to URL back to back for SECONDS; prints
//	                        the requests per second
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

var self string // the server's own base URL, for /nested

func serve() {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/created", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "failed", http.StatusInternalServerError)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		w.WriteHeader(http.StatusAccepted)
	})
	// A client call made inside a handler: its span's parent is this one.
	mux.HandleFunc("/nested", func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(self + "/ok")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(http.StatusOK)
	})
	// Burns CPU for the given milliseconds (sample correlation).
	mux.HandleFunc("/burn", func(w http.ResponseWriter, r *http.Request) {
		// ms of this thread's CPU time, not of the wall clock: on a
		// busy machine the handler gets the samples it asks for.
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		end := threadCPU() + time.Duration(ms)*time.Millisecond
		x := uint64(1)
		for threadCPU() < end {
			for i := 0; i < 10000; i++ {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		fmt.Fprintf(w, "%d\n", x)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	self = fmt.Sprintf("http://127.0.0.1:%d", port)
	fmt.Println(port)
	http.Serve(ln, mux)
}

type result struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	DurNs  int64  `json:"dur_ns"`
	// The W3C traceparent the client sent, as an upstream service
	// would have; "" for none.
	Traceparent string `json:"traceparent"`
}

func client(base string, n int) {
	paths := []string{"/ok", "/created", "/missing", "/fail", "/slow", "/nested"}
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	bufio.NewReader(os.Stdin).ReadString('\n')
	c := &http.Client{}
	out := json.NewEncoder(os.Stdout)
	for i := 0; i < n; i++ {
		p := paths[i%len(paths)]
		m := methods[(i/len(paths))%len(methods)]
		if p == "/nested" {
			m = "GET"
		}
		req, _ := http.NewRequest(m, base+p, nil)
		tp := ""
		if i%3 == 1 {
			tp = fmt.Sprintf("00-%016x%016x-%016x-%02x", 0x5eed0000+i, i+1, 0xfeed0000+i, i&1)
			req.Header.Set("traceparent", tp)
		}
		start := time.Now()
		resp, err := c.Do(req)
		d := time.Since(start)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out.Encode(result{m, p, resp.StatusCode, d.Nanoseconds(), tp})
	}
}

func load(url string, seconds int) {
	c := &http.Client{}
	n := 0
	start := time.Now()
	for time.Since(start) < time.Duration(seconds)*time.Second {
		resp, err := c.Get(url)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		n++
	}
	fmt.Printf("%.0f\n", float64(n)/time.Since(start).Seconds())
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "load" {
		s, _ := strconv.Atoi(os.Args[3])
		load(os.Args[2], s)
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "server" {
		serve()
		return
	}
	if len(os.Args) == 4 && os.Args[1] == "client" {
		n, _ := strconv.Atoi(os.Args[3])
		client(os.Args[2], n)
		return
	}
	fmt.Fprintln(os.Stderr, "usage: gohttp server | gohttp client URL N")
	os.Exit(2)
}

// threadCPU is the calling thread's CPU time (getrusage RUSAGE_THREAD,
// which package syscall does not name).
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
