package inbound_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux build we run on).
const clockTick = 10 * time.Millisecond

// cpuMeter measures the CPU time a benchmark run costs: this process's
// (getrusage, which covers the server, SQLite and the in-process emulator)
// and, on PostgreSQL, the server's. The server's is read from /proc: the
// postmaster (found as the parent of a backend) and every live child of it,
// plus the postmaster's cutime/cstime, which hold the CPU of children that
// exited during the run (backends of closed connections). It is only
// meaningful on a cluster used by this benchmark alone.
type cpuMeter struct {
	postmaster int
	self0, db0 time.Duration
	pg         *sql.DB
	b          *testing.B
}

// statementProfile reports whether the measured runs should also log the
// PostgreSQL statements they ran (PAPERCLIP_BENCH_STATEMENTS=1 on a
// cluster started with shared_preload_libraries=pg_stat_statements; the
// extension's own cost inflates the CPU figures, so it is a diagnosis,
// not a measurement).
func statementProfile() bool { return os.Getenv("PAPERCLIP_BENCH_STATEMENTS") == "1" }

// resetStatements empties pg_stat_statements for a statement profile.
func resetStatements(b *testing.B, pg *sql.DB) {
	ctx := context.Background()
	if _, err := pg.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		b.Fatalf("statement profile: %v", err)
	}
	if _, err := pg.ExecContext(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		b.Fatalf("statement profile: %v", err)
	}
}

// logStatements logs the statements run since resetStatements, the most
// expensive (by total execution time) first.
func logStatements(b *testing.B, pg *sql.DB) {
	rows, err := pg.QueryContext(context.Background(), `SELECT calls, total_exec_time, rows,
		regexp_replace(left(query, 140), '\s+', ' ', 'g') FROM pg_stat_statements
		WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 40`)
	if err != nil {
		b.Fatalf("statement profile: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var calls, n int64
		var ms float64
		var q string
		if err := rows.Scan(&calls, &ms, &n, &q); err != nil {
			b.Fatalf("statement profile: %v", err)
		}
		lines = append(lines, fmt.Sprintf("%7d calls %9.1f ms %7d rows  %s", calls, ms, n, q))
	}
	var total int64
	_ = pg.QueryRowContext(context.Background(), `SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements
		WHERE query NOT LIKE '%pg_stat_statements%'`).Scan(&total)
	b.Logf("statements (%d calls in all), by total execution time:\n%s", total, strings.Join(lines, "\n"))
}

// startCPU begins a measurement; pg is a handle on the PostgreSQL database
// under test, or nil.
func startCPU(b *testing.B, pg *sql.DB) *cpuMeter {
	b.Helper()
	m := &cpuMeter{pg: pg, b: b}
	if pg != nil && statementProfile() {
		resetStatements(b, pg)
	}
	if pg != nil {
		var backend int
		if err := pg.QueryRowContext(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
			b.Fatalf("backend pid: %v", err)
		}
		st, err := procStat(backend)
		if err != nil {
			b.Logf("no PostgreSQL CPU (server not local?): %v", err)
		} else {
			m.postmaster = st.ppid
		}
	}
	m.self0, m.db0 = selfCPU(), m.dbCPU()
	return m
}

// stop returns the CPU used since start by this process and by the
// PostgreSQL server (-1 when unknown or on SQLite).
func (m *cpuMeter) stop() (self, dbCPU time.Duration) {
	self = selfCPU() - m.self0
	dbCPU = -1
	if m.postmaster != 0 {
		dbCPU = m.dbCPU() - m.db0
	}
	if m.pg != nil && statementProfile() {
		logStatements(m.b, m.pg)
	}
	return self, dbCPU
}

// report adds cpu-ms per unit (the process, the database and their sum).
func (m *cpuMeter) report(b *testing.B, n int, unit string) {
	self, dbCPU := m.stop()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(per(self), "proc-cpu-ms/"+unit)
	total := self
	if dbCPU >= 0 {
		b.ReportMetric(per(dbCPU), "db-cpu-ms/"+unit)
		total += dbCPU
	}
	b.ReportMetric(per(total), "cpu-ms/"+unit)
}

// stealTime is the CPU time the hypervisor gave to other guests while this
// machine's CPUs wanted to run (the steal column of /proc/stat's cpu
// line), 0 where unknown. A benchmark logs it: on a shared host a run
// with seconds of steal measured the neighbours, not the code.
func stealTime() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, _ := strconv.ParseInt(f[8], 10, 64)
	return time.Duration(ticks) * clockTick
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dbCPU is the PostgreSQL server's CPU so far (see cpuMeter).
func (m *cpuMeter) dbCPU() time.Duration {
	if m.postmaster == 0 {
		return 0
	}
	pm, err := procStat(m.postmaster)
	if err != nil {
		return 0
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procStat(pid)
		if err != nil || st.ppid != m.postmaster {
			continue
		}
		ticks += st.utime + st.stime
	}
	return time.Duration(ticks) * clockTick
}

type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat parses /proc/<pid>/stat: fields after the command name (which
// may hold spaces, hence the last ')'), state first.
func procStat(pid int) (stat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return stat{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	var st stat
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseInt(f[11], 10, 64)
	st.stime, _ = strconv.ParseInt(f[12], 10, 64)
	st.cutime, _ = strconv.ParseInt(f[13], 10, 64)
	st.cstime, _ = strconv.ParseInt(f[14], 10, 64)
	return st, nil
}

// logLoad prints the machine's load average, which the figures depend on
// (on stdout: a parent benchmark's b.Logf shows only with -v).
func logLoad(b *testing.B) {
	raw, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		fmt.Printf("%s: load average %s at %s\n", b.Name(), strings.Join(strings.Fields(string(raw))[:3], " "), time.Now().UTC().Format(time.RFC3339))
	}
}
