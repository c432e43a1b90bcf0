// Work.java - the Java workload of tests/integration/test_hotspot_frames.py:
// a known call graph on two threads, run for argv[0] seconds. The test
// starts it with -XX:CompileCommand=inline,Work::mix, dontinline,Work::hash,
// dontinline,Work::half and exclude,Work::slow, so the graph does not depend
// on C2's heuristics:
//   main thread: main -> outer -> middle -> spin -> mix -> hash, half
//                (spin is hot and compiled; mix is inlined into it; hash
//                and half are compiled on their own and called from the
//                inlined mix; hash loops twice as long as half. Their
//                loops are long enough for C2 to keep a safepoint poll in
//                them, whose debug info lets JFR decode samples there)
//   thread "slow": Thread.run -> lambda -> slowLoop -> slow (slow stays
//                interpreted)
// With argv[1] "wait" it prints "ready" and waits for a line on stdin first.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Work {
    static volatile long sink;
    static volatile boolean stop;

    static long hash(long x) {
        long h = x;
        for (int k = 0; k < 4096; k++) {
            h = (h ^ (h >>> 31)) * 0x9E3779B97F4A7C15L; // HASH
        }
        return h;
    }

    static long half(long x) {
        long h = x;
        for (int k = 0; k < 2048; k++) {
            h = (h ^ (h >>> 29)) * 0xBF58476D1CE4E5B9L; // HALF
        }
        return h;
    }

    static long mix(long x) {
        return hash(x) ^ half(x >>> 29); // CALL_HASH
    }

    static long spin(int n) {
        long t = 0;
        for (int i = 0; i < n; i++) {
            t += mix(t + i); // CALL_MIX
        }
        return t;
    }

    static void middle() {
        while (!stop) {
            sink += spin(1000); // CALL_SPIN
        }
    }

    static void outer() {
        middle(); // CALL_MIDDLE
    }

    static long slow(int n) {
        long t = 1;
        for (int i = 0; i < n; i++) {
            t = t * 31 + (i ^ (t >>> 7)); // SLOW
        }
        return t;
    }

    static void slowLoop() {
        while (!stop) {
            sink += slow(20000); // CALL_SLOW
        }
    }

    public static void main(String[] args) throws Exception {
        long seconds = Long.parseLong(args[0]);
        if (args.length > 1 && args[1].equals("wait")) {
            System.out.println("ready");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
        }
        Thread b = new Thread(Work::slowLoop, "slow");
        b.setDaemon(true);
        b.start();
        Thread timer = new Thread(() -> {
            try {
                Thread.sleep(seconds * 1000);
            } catch (InterruptedException e) {
            }
            stop = true;
        }, "timer");
        timer.setDaemon(true);
        timer.start();
        outer(); // CALL_OUTER
        b.join();
    }
}
