// Work.java - the Java workload of tests/integration/test_hotspot_frames.py:
// a known call graph on two threads, run for argv[0] seconds.
//   main thread: main -> outer -> middle -> spin -> mix (spin is hot and
//                compiled; mix is small: C2 inlines it into spin)
//   thread "slow": slowLoop -> slow (excluded from compilation by the test's
//                -XX:CompileCommand: stays interpreted)
// Waits for a line on stdin first when argv[1] is "wait".
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Work {
    static volatile long sink;
    static volatile boolean stop;

    static long mix(long x) {
        return (x * 0x9E3779B97F4A7C15L) ^ (x >>> 29); // MIX
    }

    static long spin(int n) {
        long t = 0;
        for (int i = 0; i < n; i++) {
            t += mix(t + i); // SPIN
        }
        return t;
    }

    static void middle() {
        while (!stop) {
            sink += spin(100000); // CALL_SPIN
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
