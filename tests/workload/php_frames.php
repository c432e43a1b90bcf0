<?php
// The workload of tests/integration/test_php_frames.py: a known call graph
// under Excimer (php-excimer's ExcimerProfiler, CPU time at 200 Hz) while
// sonde samples it too. run() alternates two branches by CPU time, 3:1:
// branch_a calls a method, Worker::spin; branch_b calls a C function,
// crc32(). Usage: php php_frames.php OUT.json SECONDS. Prints "ready" and
// waits for a line on stdin before it starts.
class Worker
{
    public function spin(int $n): int
    {
        $t = 0;
        for ($i = 0; $i < $n; $i++) { // HOT_FOR
            $t += ($i * $i * $i) % 7 + ($i << 3) % 11 - ($i ^ 5); // HOT_SPIN
        }
        return $t;
    }
}

function cpu(): float
{
    $r = getrusage(); // CALL_RUSAGE
    return $r['ru_utime.tv_sec'] + $r['ru_utime.tv_usec'] / 1e6
        + $r['ru_stime.tv_sec'] + $r['ru_stime.tv_usec'] / 1e6;
}

function branch_a(Worker $w, float $budget): float
{
    $start = cpu();
    do {
        $w->spin(20000); // CALL_SPIN
    } while (cpu() - $start < $budget);
    return cpu() - $start;
}

function branch_b(string $buf, float $budget): float
{
    $start = cpu();
    $s = 0;
    do {
        $s ^= crc32($buf); // CALL_CRC
    } while (cpu() - $start < $budget);
    return cpu() - $start;
}

function run(float $seconds): array
{
    $w = new Worker();
    $buf = str_repeat("sonde", 200000);
    $a = $b = 0.0;
    $end = hrtime(true) + $seconds * 1e9;
    while (hrtime(true) < $end) {
        $a += branch_a($w, 0.030); // CALL_A
        $b += branch_b($buf, 0.010); // CALL_B
    }
    return [$a, $b];
}

$prof = new ExcimerProfiler();
$prof->setEventType(EXCIMER_CPU);
$prof->setPeriod(0.005);
echo "ready\n";
fgets(STDIN);
$prof->start();
[$a, $b] = run((float)$argv[2]); // CALL_RUN
$prof->stop();
$log = $prof->getLog();
$agg = $log->aggregateByFunction();
// Excimer's log entries (each one signal handled; its event count adds the
// timer's overruns): how many samples its shares really rest on.
$entries = 0;
foreach ($log as $entry) {
    $entries++;
}
file_put_contents($argv[1], json_encode(['a' => $a, 'b' => $b, 'excimer' => $agg,
                                         'excimer_entries' => $entries]));
