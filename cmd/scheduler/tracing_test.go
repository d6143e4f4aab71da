package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/tracing/tracingtest"
)

const tracingToken = "tracing-test-token"

// traceTarget is an HTTP job's target that keeps the traceparent of every call, by run.
type traceTarget struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]string // X-Scheduler-Run-Id -> traceparent of each attempt ("" for none)
}

func startTraceTarget(t *testing.T) *traceTarget {
	tt := &traceTarget{calls: map[string][]string{}}
	tt.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tt.mu.Lock()
		run := r.Header.Get("X-Scheduler-Run-Id")
		tt.calls[run] = append(tt.calls[run], r.Header.Get("Traceparent"))
		tt.mu.Unlock()
	}))
	t.Cleanup(tt.Close)
	return tt
}

func (tt *traceTarget) traceparents(run string) []string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return append([]string(nil), tt.calls[run]...)
}

// serveProcess is a real `scheduler serve` (this test binary, SCHEDULER_TEST_EXEC) whose JSON
// log is kept line by line.
type serveProcess struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  []map[string]any
	done chan struct{}
}

// startServe starts a replica on a new database with env added; no OTEL_* variable of the
// test's own environment reaches it.
func startServe(t *testing.T, env ...string) *serveProcess {
	t.Helper()
	u := testdb.New(t)
	cmd := exec.Command(os.Args[0], "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SCHEDULER_TEST_EXEC=1", "DATABASE_URL="+u, "SCHEDULER_HTTP_ADDR=127.0.0.1:0",
		"SCHEDULER_INSTANCE_ID=tracing-test", "SCHEDULER_API_TOKEN="+tracingToken, "SCHEDULER_HTTP_ALLOW=127.0.0.1/32",
		"SCHEDULER_LEASE_TIMEOUT=2s", "SCHEDULER_LOG_LEVEL=debug")
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &serveProcess{cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line map[string]any
			dec := json.NewDecoder(strings.NewReader(sc.Text()))
			dec.UseNumber() // run ids are above 2^53
			if dec.Decode(&line) != nil {
				continue
			}
			p.mu.Lock()
			p.log = append(p.log, line)
			p.mu.Unlock()
			if line["msg"] == "http listening" {
				listening <- line["addr"].(string)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			for _, l := range p.lines() {
				t.Log(l)
			}
		}
	})
	select {
	case p.addr = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the replica never listened")
	}
	// Leading: its /readyz says ready once migrated; the engine starts with the first term.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(p.find("elected leader", "")) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func (p *serveProcess) lines() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.log...)
}

// find is the log lines whose msg contains msg and, unless runID is "", of that run.
func (p *serveProcess) find(msg, runID string) []map[string]any {
	var out []map[string]any
	for _, l := range p.lines() {
		m, _ := l["msg"].(string)
		if strings.Contains(m, msg) && (runID == "" || fmt.Sprint(l["run_id"]) == runID) {
			out = append(out, l)
		}
	}
	return out
}

// stop sends SIGTERM and waits for the process to exit: the spans still buffered are
// exported on the way out.
func (p *serveProcess) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the replica did not stop within 30 s of SIGTERM")
	}
	require.NoError(t, p.cmd.Wait())
}

// call sends one API request and returns its status and decoded body.
func (p *serveProcess) call(t *testing.T, method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tracingToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var m map[string]any
	if len(b) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&m), "%s", b)
	}
	return res.StatusCode, m
}

// traceparentParts splits a W3C traceparent into its trace id and span (parent) id.
func traceparentParts(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(tp, "-")
	require.Len(t, parts, 4, "traceparent %q", tp)
	require.Equal(t, "00", parts[0])
	return parts[1], parts[2]
}

func spanByID(spans []tracingtest.Span, id string) *tracingtest.Span {
	for i := range spans {
		if spans[i].SpanID == id {
			return &spans[i]
		}
	}
	return nil
}

// runSpan is the run span of run id, or nil.
func runSpan(spans []tracingtest.Span, runID string) *tracingtest.Span {
	for i := range spans {
		if spans[i].Name == "scheduler.run" && spans[i].Attrs["scheduler.run.id"] == runID {
			return &spans[i]
		}
	}
	return nil
}

// The "How we will know": a replica configured by OTEL_EXPORTER_OTLP_ENDPOINT sends
// its spans to an OTLP receiver. A scheduled run's call carries a traceparent naming its
// attempt's span, and the run's trace holds the slot's claim, the run and the attempt; the
// run's log lines carry its trace id. A manual trigger that brings a traceparent has its run
// in that trace. What is still buffered at SIGTERM is exported before the process exits.
func TestTracesReachAnOTLPReceiver(t *testing.T) {
	t.Parallel()
	receiver := tracingtest.Start(t)
	target := startTraceTarget(t)
	p := startServe(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL, "OTEL_SERVICE_NAME=scheduler-tracing-test")

	status, body := p.call(t, "POST", "/v1/jobs", `{"name": "traced", "schedule": "@every 1s", "catchup": "0s",
		"http": {"url": "`+target.URL+`/hook"}}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)

	// A scheduled run: its slot's claim, the run and the attempt, in one trace.
	var scheduled string
	deadline := time.Now().Add(30 * time.Second)
	for scheduled == "" && time.Now().Before(deadline) {
		for _, l := range p.find("run finished", "") {
			if l["job"] == "traced" && l["trigger"] == "schedule" {
				scheduled = fmt.Sprint(l["run_id"])
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotEmpty(t, scheduled, "a scheduled run of the job finished")
	tps := target.traceparents(scheduled)
	require.Len(t, tps, 1, "the scheduled run called once")
	require.NotEmpty(t, tps[0], "the scheduled run's call carries a traceparent")
	traceID, attemptID := traceparentParts(t, tps[0])

	// A manual trigger from a caller inside a trace of its own.
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	status, body = p.call(t, "POST", "/v1/jobs/traced/runs?wait=30s", "",
		"Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, "succeeded", body["status"], "%v", body)
	manual := fmt.Sprint(body["id"])
	manualTPs := target.traceparents(manual)
	require.Len(t, manualTPs, 1)
	manualTrace, manualAttempt := traceparentParts(t, manualTPs[0])
	assert.Equal(t, callerTrace, manualTrace, "the manual run's call continues the trigger's trace")
	// The answer comes once the run's end is committed; its "run finished" line just after.
	// Stopping in between would interrupt the run's goroutine before it logs that line.
	for deadline := time.Now().Add(10 * time.Second); len(p.find("run finished", manual)) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}

	p.stop(t)
	spans := receiver.Await(t, 10*time.Second, "the runs' spans", func(s []tracingtest.Span) bool {
		return spanByID(s, attemptID) != nil && spanByID(s, manualAttempt) != nil
	})

	// The scheduled run: claim -> run -> attempt, and the target got the attempt's span id.
	attempt := spanByID(spans, attemptID)
	require.NotNil(t, attempt, "the span the target's traceparent names was exported")
	assert.Equal(t, "scheduler.attempt", attempt.Name)
	assert.Equal(t, "client", attempt.Kind)
	assert.Equal(t, traceID, attempt.TraceID)
	assert.Equal(t, "1", attempt.Attrs["scheduler.attempt"])
	assert.Equal(t, "200", attempt.Attrs["http.response.status_code"])
	assert.Equal(t, "scheduler-tracing-test", attempt.Service, "OTEL_SERVICE_NAME names the service")
	run := spanByID(spans, attempt.ParentSpanID)
	require.NotNil(t, run, "the attempt's parent was exported")
	assert.Equal(t, "scheduler.run", run.Name)
	assert.Equal(t, scheduled, run.Attrs["scheduler.run.id"])
	assert.Equal(t, "traced", run.Attrs["scheduler.job"])
	assert.Equal(t, "default", run.Attrs["scheduler.namespace"])
	assert.Equal(t, "schedule", run.Attrs["scheduler.run.trigger"])
	assert.Equal(t, "succeeded", run.Attrs["scheduler.run.status"])
	assert.NotEmpty(t, run.Attrs["scheduler.slot"])
	claim := spanByID(spans, run.ParentSpanID)
	require.NotNil(t, claim, "the run's parent was exported")
	assert.Equal(t, "scheduler.claim", claim.Name)
	assert.Equal(t, "", claim.ParentSpanID, "the slot's claim starts the run's trace")
	assert.Equal(t, run.Attrs["scheduler.slot"], claim.Attrs["scheduler.slot"])
	require.Len(t, claim.Links, 1, "the claim links to its batch's transaction")
	batch := spanByID(spans, claim.Links[0].SpanID)
	require.NotNil(t, batch)
	assert.Equal(t, "scheduler.claim.batch", batch.Name)
	assert.NotEmpty(t, batch.Attrs["scheduler.claim.count"])

	// One trace per run: every scheduled run's trace is its own.
	traces := map[string]string{}
	for _, s := range spans {
		if s.Name == "scheduler.run" {
			id := s.Attrs["scheduler.run.id"]
			assert.NotContains(t, traces, s.TraceID, "runs %s and %s share a trace", traces[s.TraceID], id)
			traces[s.TraceID] = id
		}
	}

	// The run's log lines carry its trace and span ids.
	for _, msg := range []string{"run started", "call attempt", "run finished"} {
		lines := p.find(msg, scheduled)
		require.NotEmpty(t, lines, "log line %q of run %s", msg, scheduled)
		assert.Equal(t, traceID, lines[0]["trace_id"], "%q: %v", msg, lines[0])
		assert.Equal(t, run.SpanID, lines[0]["span_id"], "%q: %v", msg, lines[0])
	}

	// The manual run is in the caller's trace, under the caller's span.
	mrun := runSpan(spans, manual)
	require.NotNil(t, mrun, "the manual run's span was exported")
	assert.Equal(t, callerTrace, mrun.TraceID)
	assert.Equal(t, "manual", mrun.Attrs["scheduler.run.trigger"])
	mclaim := spanByID(spans, mrun.ParentSpanID)
	require.NotNil(t, mclaim)
	assert.Equal(t, "scheduler.claim", mclaim.Name, "a queued run's claim is its pick-up")
	assert.Equal(t, callerSpan, mclaim.ParentSpanID, "the pick-up is a child of the trigger's span")
	assert.Equal(t, mrun.SpanID, spanByID(spans, manualAttempt).ParentSpanID)
	mlines := p.find("run finished", manual)
	require.NotEmpty(t, mlines)
	assert.Equal(t, callerTrace, mlines[0]["trace_id"])
}

// Tracing off: without OTEL_* (or with OTEL_SDK_DISABLED=true even though an endpoint is
// named), no call carries a traceparent, not even a manual trigger's, no log line a trace id,
// and nothing reaches the receiver.
func TestTracingOffSendsNothing(t *testing.T) {
	t.Parallel()
	receiver := tracingtest.Start(t)
	for name, env := range map[string][]string{
		"no OTEL variable":  nil,
		"OTEL_SDK_DISABLED": {"OTEL_SDK_DISABLED=true", "OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.URL},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			target := startTraceTarget(t)
			p := startServe(t, env...)
			status, body := p.call(t, "POST", "/v1/jobs", `{"name": "untraced", "schedule": "0 0 1 1 *",
				"http": {"url": "`+target.URL+`/hook"}}`)
			require.Equal(t, http.StatusCreated, status, "%v", body)
			status, body = p.call(t, "POST", "/v1/jobs/untraced/runs?wait=30s", "",
				"Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			require.Equal(t, http.StatusOK, status, "%v", body)
			require.Equal(t, "succeeded", body["status"], "%v", body)
			run := fmt.Sprint(body["id"])
			assert.Equal(t, []string{""}, target.traceparents(run), "the call carries no traceparent")
			p.stop(t)
			for _, l := range p.lines() {
				assert.NotContains(t, l, "trace_id", "%v", l)
			}
		})
	}
	t.Cleanup(func() { assert.Zero(t, receiver.Requests(), "nothing was exported") })
}
