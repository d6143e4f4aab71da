package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The message pipeline's throughput: abandon-recovery sends one message per abandoned lead
// through a webhook receiver that answers after receiverLatency, at sendConcurrency and at
// concurrency 1, on copies of the same data, in child processes (peak RSS); and once more
// with an instant sender, which leaves only the claim and record transactions.
const (
	receiverLatency = 20 * time.Millisecond
	sendConcurrency = 64
	// claimBatch is the leads (messages) one claim transaction claims, and so one wave of
	// sends (SCHEDULER_ABANDON_BATCH_SIZE; the default is 100). A wave ends with fewer sends
	// in flight than the concurrency, and the next claim waits for the wave: a batch of
	// several times the concurrency keeps the senders busy.
	claimBatch = 500
)

// abandonedLeadsSQL inserts $1 leads of one form that started long ago and never submitted:
// all due a recovery message.
const abandonedLeadsSQL = `
WITH tenant AS (INSERT INTO tenants (name) VALUES ('bench messages') RETURNING id),
form AS (INSERT INTO forms (tenant_id, name) SELECT id, 'trial' FROM tenant RETURNING id, tenant_id)
INSERT INTO leads (form_id, tenant_id, session_id, email, channel, started_at)
SELECT f.id, f.tenant_id, 'bench-' || i, 'lead' || i || '@bench.example', 'EMAIL',
       now() - interval '2 hours' - i * interval '1 second'
FROM form f, generate_series(1, $1::int) AS i`

// receiver is the local webhook receiver: it answers each POST after receiverLatency and
// counts the deliveries per Idempotency-Key.
type receiver struct {
	srv      *http.Server
	url      string
	mu       sync.Mutex
	keys     map[string]int
	mismatch int // requests whose Idempotency-Key is not message-delivery-<deployment_id>-<delivery_id>
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/messages", keys: map[string]int{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	var m struct {
		DeliveryID int64  `json:"delivery_id"`
		Deployment string `json:"deployment_id"`
	}
	body, _ := io.ReadAll(req.Body)
	_ = json.Unmarshal(body, &m)
	key := req.Header.Get("Idempotency-Key")
	time.Sleep(receiverLatency) // the provider's answer time
	r.mu.Lock()
	r.keys[key]++
	if m.Deployment == "" || key != "message-delivery-"+m.Deployment+"-"+strconv.FormatInt(m.DeliveryID, 10) {
		r.mismatch++
	}
	r.mu.Unlock()
	_, _ = w.Write([]byte(`{"id":"rcv-` + key + `"}`))
}

// reset forgets the deliveries counted so far, between two runs.
func (r *receiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = map[string]int{}
	r.mismatch = 0
}

// check verifies that the receiver got exactly sent deliveries, each key once.
func (r *receiver) check(sent int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if int64(len(r.keys)) != sent {
		return fmt.Errorf("the receiver got %d distinct messages, the job recorded %d sent", len(r.keys), sent)
	}
	for key, n := range r.keys {
		if n != 1 {
			return fmt.Errorf("the receiver got %s %d times", key, n)
		}
	}
	if r.mismatch > 0 {
		return fmt.Errorf("%d requests without Idempotency-Key: message-delivery-<deployment>-<id>", r.mismatch)
	}
	return nil
}

// pipelineRun is one abandon-recovery run in a child process.
type pipelineRun struct {
	res       jobResult
	sent      int64
	perSecond float64
	dbSent    int64 // SENT rows in message_deliveries after the run
}

func runPipeline(ctx context.Context, b *bench, tmpl, webhookURL string, concurrency int, runFor time.Duration) (pipelineRun, error) {
	var run pipelineRun
	err := onCopy(ctx, b, tmpl, func(db *pgxpool.Pool, url string) error {
		env := []string{envWebhookURL + "=" + webhookURL, envConcurrency + "=" + strconv.Itoa(concurrency),
			envClaimBatch + "=" + strconv.Itoa(claimBatch)}
		if runFor > 0 {
			env = append(env, envRunFor+"="+runFor.String())
		}
		res, err := runJobChild(ctx, "abandon-recovery", url, env...)
		if err != nil {
			return err
		}
		run.res = res
		run.sent = res.stats.Detail["sent"]
		run.perSecond = float64(run.sent) / res.took.Seconds()
		return db.QueryRow(ctx, `SELECT count(*) FROM message_deliveries WHERE status = 'SENT'`).Scan(&run.dbSent)
	})
	if err == nil && run.dbSent != run.sent {
		err = fmt.Errorf("the job counted %d sent, message_deliveries holds %d SENT", run.sent, run.dbSent)
	}
	return run, err
}

func benchMessages(ctx context.Context, b *bench) error {
	n := b.sz.messages
	tmpl, err := b.migratedDB(ctx, "messages_tmpl")
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, b.url(tmpl))
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, abandonedLeadsSQL, n)
	pool.Close()
	if err != nil {
		return fmt.Errorf("insert %d abandoned leads: %w", n, err)
	}
	if err := b.finishTemplate(ctx, tmpl); err != nil {
		return err
	}
	defer b.dropDB(ctx, tmpl)
	rcv, err := startReceiver()
	if err != nil {
		return err
	}
	defer rcv.srv.Close()

	var fast, slow []pipelineRun
	for rep := range b.sz.reps {
		rcv.reset()
		run, err := runPipeline(ctx, b, tmpl, rcv.url, sendConcurrency, 0)
		if err != nil {
			return fmt.Errorf("concurrency %d: %w", sendConcurrency, err)
		}
		if run.sent != int64(n) {
			return fmt.Errorf("concurrency %d sent %d messages, want %d", sendConcurrency, run.sent, n)
		}
		if err := rcv.check(run.sent); err != nil {
			return err
		}
		fast = append(fast, run)
		// Concurrency 1 sends a message per receiverLatency: measured over a window, the
		// run cancelled at its end (which also gives its unsent claims back).
		if rep > 0 && b.quick {
			continue
		}
		rcv.reset()
		run, err = runPipeline(ctx, b, tmpl, rcv.url, 1, b.sz.slowWindow)
		if err != nil {
			return fmt.Errorf("concurrency 1: %w", err)
		}
		if err := rcv.check(run.sent); err != nil {
			return err
		}
		slow = append(slow, run)
	}
	instant, err := runPipeline(ctx, b, tmpl, "", sendConcurrency, 0)
	if err != nil {
		return fmt.Errorf("instant sender: %w", err)
	}
	if instant.sent != int64(n) {
		return fmt.Errorf("instant sender sent %d messages, want %d", instant.sent, n)
	}

	fastRate, slowRate := medianRate(fast), medianRate(slow)
	var maxRSS, recordTx int64
	var perSecond []string
	for _, r := range fast {
		maxRSS = max(maxRSS, r.res.maxRSSKB)
		recordTx = max(recordTx, r.res.stats.Detail["record_batches"])
		perSecond = append(perSecond, fmt.Sprintf("%.0f/s", r.perSecond))
	}
	data := fmt.Sprintf("%s abandoned leads, one message each; webhook receiver answering after %s", count(n), receiverLatency)
	b.report.add(row{name: fmt.Sprintf("message delivery throughput at concurrency %d", sendConcurrency), data: data,
		value: fmt.Sprintf("%.0f msgs/s", fastRate), target: "≥ 1000 msgs/s", pass: verdict(fastRate >= 1000),
		note: fmt.Sprintf("abandon-recovery in a child process, webhook sender over loopback; claim transactions of %d messages "+
			"(SCHEDULER_ABANDON_BATCH_SIZE=%d), each claim's messages sent as one wave; %d messages in at most %d record "+
			"transactions (%.0f per transaction); the receiver saw each Idempotency-Key once; runs: %v",
			claimBatch, claimBatch, n, recordTx, float64(n)/float64(max(recordTx, 1)), perSecond)})
	b.report.add(row{name: fmt.Sprintf("message throughput, concurrency %d ÷ concurrency 1", sendConcurrency), data: data,
		value: fmt.Sprintf("%.0f msgs/s", fastRate), ref: fmt.Sprintf("%.1f msgs/s", slowRate),
		ratio: fmt.Sprintf("%.1f", fastRate/slowRate), target: "≥ 15", pass: verdict(fastRate/slowRate >= 15),
		note: fmt.Sprintf("the same pipeline and data; concurrency 1 measured over %s (then cancelled: unsent claims given back), %d messages sent",
			b.sz.slowWindow, slow[len(slow)/2].sent)})
	b.report.add(row{name: "message pipeline with an instant sender (claim and record transactions only)", data: data,
		value: fmt.Sprintf("%.0f msgs/s", instant.perSecond), ref: fmt.Sprintf("%.0f msgs/s", fastRate),
		ratio: fmt.Sprintf("%.1f", instant.perSecond/fastRate),
		note: fmt.Sprintf("the log sender (discarded) at concurrency %d: what the claim and record transactions alone allow, "+
			"so the ratio is their headroom over the webhook run; a claim waits for the previous wave (a crash leaves at most one "+
			"batch of claims behind), so their time adds to the sends' instead of overlapping it; %d record transactions",
			sendConcurrency, instant.res.stats.Detail["record_batches"])})
	b.report.add(row{name: "message pipeline peak RSS of the job's process", data: data,
		value: fmt.Sprintf("%.1f MB", float64(maxRSS)/1024), target: "< 100 MB", pass: verdict(maxRSS < 100*1024),
		note: fmt.Sprintf("max over the concurrency-%d runs of rusage Maxrss of the child process (Go runtime included)", sendConcurrency)})
	return nil
}

func medianRate(runs []pipelineRun) float64 {
	if len(runs) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(runs))
	for i, r := range runs {
		// A rate as a duration per message, so median() applies.
		ds[i] = time.Duration(float64(time.Second) / r.perSecond)
	}
	return float64(time.Second) / float64(median(ds))
}
