package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// The partitions run's references, measured in the same run: the raw floor of its HTTP
// calls, and each replica's CPU time over the measured minutes alone.

// floorSlot and warmSlot key the floor's calls at its receiver (X-Scheduler-Scheduled-At).
const floorSlot, warmSlot = "floor", "warm"

// partitionFloor is the raw HTTP floor of the partitions run's calls: the p50 and p99 of
// each repetition of httpFloor, its concurrency, and the connections opened after a release.
type partitionFloor struct {
	p50, p99 []time.Duration
	conc     int
	dialed   int64
}

// measureFloor runs httpFloor reps times: it lasts seconds, so a moment's load of the
// shared machine would sway a single one.
func measureFloor(ctx context.Context, n, conc, reps int) (partitionFloor, error) {
	f := partitionFloor{conc: conc}
	for range max(reps, 1) {
		late, dialed, err := httpFloor(ctx, n, conc)
		if err != nil {
			return f, err
		}
		f.p50 = append(f.p50, percentile(late, 50))
		f.p99 = append(f.p99, percentile(late, 99))
		f.dialed += dialed
	}
	return f, nil
}

// httpFloor makes n bare POSTs from one http.Client to a receiver like the run's (a
// slotReceiver answering in receiverDelay), conc at a time, with no scheduler: the least
// any scheduler on this machine could take to make the run's calls. Its conc keep-alive
// connections are opened first: every warm-up call is held at the receiver until conc of
// them are in flight at once. It returns each call's arrival at the receiver after the
// calls were released, and how many connections were opened after the release (0 when
// the warm-up opened them all).
func httpFloor(ctx context.Context, n, conc int) (late []time.Duration, dialed int64, err error) {
	recv := &slotReceiver{arrived: map[string][]time.Time{}, keys: map[uuid.UUID]int32{}, all: make(chan struct{})}
	srv, conns := floorServer(recv, conc)
	defer srv.Close()
	// The timeout bounds the warm-up's wait for its conc calls, and any call, against a hang.
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	post := func(slot string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/hook", nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Scheduler-Scheduled-At", slot)
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			return fmt.Errorf("the floor's receiver answered %s", res.Status)
		}
		return nil
	}

	var next atomic.Int64
	release := make(chan struct{})
	var warm, done sync.WaitGroup
	errs := make(chan error, conc)
	warm.Add(conc)
	done.Add(conc)
	for range conc {
		go func() {
			defer done.Done()
			err := post(warmSlot)
			warm.Done()
			if err != nil {
				errs <- err
				return
			}
			<-release
			for next.Add(1) <= int64(n) {
				if err := post(floorSlot); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	warm.Wait()
	opened := conns.Load()
	start := time.Now()
	close(release)
	done.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, 0, fmt.Errorf("the raw HTTP floor: %w", err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, at := range recv.arrived[floorSlot] {
		late = append(late, at.Sub(start))
	}
	return late, conns.Load() - opened, nil
}

// floorServer serves recv, but holds each warm-up call until conc of them are in flight
// at once, so that they open conc connections; conns counts the connections opened.
func floorServer(recv *slotReceiver, conc int) (srv *httptest.Server, conns *atomic.Int64) {
	var warmed atomic.Int64
	conns = new(atomic.Int64)
	allWarm := make(chan struct{})
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Scheduler-Scheduled-At") != warmSlot {
			recv.ServeHTTP(w, r)
			return
		}
		if warmed.Add(1) == int64(conc) {
			close(allWarm)
		}
		select {
		case <-allWarm:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	return srv, conns
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux
// architecture (sysconf(_SC_CLK_TCK) would need cgo to ask).
const clockTicks = 100

// procCPU is process pid's user + system CPU time so far, from /proc/<pid>/stat: unlike
// rusage, it can be read while the process runs.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the fields after it
	// start past its last ')', at field 3, so utime and stime (fields 14, 15) are 11 and 12.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat has no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat has no utime and stime", pid)
	}
	var ticks int64
	for _, s := range f[11:13] {
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += t
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuTimes is each replica's CPU time so far (procCPU), in c.procs' order.
func (c *cluster) cpuTimes() ([]time.Duration, error) {
	var ts []time.Duration
	for _, p := range c.procs {
		t, err := procCPU(p.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("replica %s's CPU time (has it exited? logs in %s): %w", p.id, c.dir, err)
		}
		ts = append(ts, t)
	}
	return ts, nil
}
