package engine

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets/natstest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A NATS job due every second, through two SIGKILLs of the leader among three real
// processes, each killed once a message is in the stream and its ack held back by a proxy,
// so its run cannot record success (docs/design.md guarantee 11): every slot ends with one row; every slot
// done has its message in the stream exactly once, under the slot's key as Nats-Msg-Id
// (a recovery's publish is the duplicate the stream drops); no key names two slots. And a
// job of a namespace not allowed to reach the server's private address is refused at run,
// nothing published.
func TestNATSJobOncePerSlotThroughLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	ctx := context.Background()
	srv := natstest.Start(t)
	stream := srv.AddStream(t, "TICKS", "ticks.>", "refused.>")
	arrived := make(chan *nats.Msg, 64)
	nc, err := nats.Connect(srv.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	_, err = nc.ChanSubscribe("ticks.>", arrived)
	require.NoError(t, err)

	// The replicas reach the server through a proxy that can hold back what the server
	// answers, so a leader is killed after its message is in the stream and before its ack
	// reaches it: its run cannot have recorded success.
	proxy := newHoldProxy(t, srv.Addr().String())
	createDefinition(t, db, `{"name": "publish-every-second", "schedule": "@every 1s", "timeout": "10s",
		"retry": {"max_attempts": 3, "initial_backoff": "100ms", "max_backoff": "200ms"},
		"nats": {"url": "nats://`+proxy.addr+`", "subject": "ticks.every-second", "body": "{\"hello\":1}"}}`)
	_, err = db.Pool.Exec(ctx, `INSERT INTO scheduler_namespaces (name) VALUES ('ops')`)
	require.NoError(t, err)
	createDefinition(t, db, `{"name": "publish-refused", "namespace": "ops", "schedule": "@every 1s",
		"nats": {"url": "`+srv.URL+`", "subject": "refused.tick"}}`)

	env := []string{"SCHEDULER_HTTP_ALLOW=127.0.0.1/32", "SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false"}
	procs := map[string]*process{}
	for _, id := range []string{"nats-a", "nats-b", "nats-c"} {
		procs[id] = startProcessIn(t, "", bin, url, id, env...)
	}
	epoch := int64(0)
	for kill := 0; kill < 2; kill++ {
		l := awaitLeader(t, db, procs, epoch)
		epoch = l.Epoch
		awaitSuccesses(t, db, "publish-every-second", epoch, 3)
		proxy.hold()
		drainMessages(arrived)
		select { // killed once a message is in the stream, its ack held back
		case <-arrived:
		case <-time.After(waitTimeout):
			t.Fatal("no message arrived")
		}
		p := procs[l.InstanceID]
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		_ = p.cmd.Wait()
		proxy.release()
	}
	l := awaitLeader(t, db, procs, epoch)
	awaitSuccesses(t, db, "publish-every-second", l.Epoch, 3)
	for _, p := range procs {
		if p.cmd.ProcessState == nil {
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			_ = p.cmd.Wait()
		}
	}

	job := "publish-every-second"
	assert.Zero(t, count(t, db, `
		SELECT count(*) FROM generate_series(
			(SELECT min(scheduled_at) FROM job_runs WHERE job = $1),
			(SELECT max(scheduled_at) FROM job_runs WHERE job = $1), interval '1 second') AS s
		WHERE NOT EXISTS (SELECT 1 FROM job_runs WHERE job = $1 AND scheduled_at = s)`, job), "slots without a row")

	// The slots done: a succeeded run, or an abandoned one whose recovery succeeded.
	rows, err := db.Pool.Query(ctx, `
		SELECT to_char(coalesce(r.scheduled_at, o.scheduled_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
		FROM job_runs r LEFT JOIN job_runs o ON o.id = r.recovers_run_id
		WHERE r.job = $1 AND r.status = 'succeeded'`, job)
	require.NoError(t, err)
	done := map[string]bool{}
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		assert.False(t, done[s], "slot %s succeeded twice", s)
		done[s] = true
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(done), 9, "the NATS job ran")

	keyOfSlot, slotOfKey := map[string]string{}, map[string]string{}
	for _, m := range natstest.Messages(t, stream) {
		require.Equal(t, "ticks.every-second", m.Subject, "nothing reached the stream from the refused job")
		slot := m.Header.Get("X-Scheduler-Scheduled-At")
		require.NotEmpty(t, m.MsgID)
		_, seen := keyOfSlot[slot]
		assert.False(t, seen, "slot %s is in the stream twice", slot)
		assert.NotContains(t, slotOfKey, m.MsgID, "key %s names two slots", m.MsgID)
		assert.Equal(t, `{"hello":1}`, m.Data)
		keyOfSlot[slot], slotOfKey[m.MsgID] = m.MsgID, slot
	}
	for slot := range done {
		assert.Contains(t, keyOfSlot, slot, "slot %s succeeded without its message in the stream", slot)
	}
	for slot := range keyOfSlot {
		assert.True(t, done[slot], "slot %s's message is in the stream, and the slot is not recorded done", slot)
	}
	recoveries := count(t, db, `SELECT count(*) FROM job_runs WHERE job = $1 AND trigger = 'recovery' AND status = 'succeeded'`, job)
	duplicates := count(t, db, `SELECT count(*) FROM run_attempts a JOIN job_runs r ON r.id = a.run_id
		WHERE r.job = $1 AND a.body LIKE 'acknowledged as a duplicate%'`, job)
	t.Logf("%d slots done, %d messages, %d recoveries, %d duplicate acks", len(done), len(keyOfSlot), recoveries, duplicates)
	// Each kill leaves a slot to recover, unless an ack passed the proxy in the instant
	// before it held (then that run recorded its success): at least one did.
	assert.Positive(t, recoveries, "a kill left a slot to recover")
	assert.Positive(t, duplicates, "a recovery published its slot's message again, which the stream dropped")

	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'ops/publish-refused' AND status = 'succeeded'`))
	assert.Positive(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'ops/publish-refused' AND status = 'failed'
		AND error LIKE '%not attempted%loopback address%'`), "the refused job's runs fail saying why")
}

// awaitSuccesses waits until job succeeded n times under epoch.
func awaitSuccesses(t *testing.T, db *testdb.DB, job string, epoch int64, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = $1 AND epoch = $2 AND status = 'succeeded'`, job, epoch) >= n
	}, 60*time.Second, 20*time.Millisecond, "%s to succeed %d times under epoch %d", job, n, epoch)
}

func drainMessages(c chan *nats.Msg) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// holdProxy forwards TCP connections to a NATS server; while held, what the server
// answers on a connection that has published is kept back (the connection's handshake, and
// what the client sends, still go through).
type holdProxy struct {
	addr string
	mu   sync.Mutex
	gate chan struct{} // closed while answers flow
}

func newHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	p := &holdProxy{addr: ln.Addr().String(), gate: make(chan struct{})}
	close(p.gate)
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			published := &atomic.Bool{}
			go func() { _, _ = io.Copy(server, publishSeen{client, published}); server.Close() }()
			go func() { _, _ = io.Copy(client, gatedReader{p, server, published}); client.Close() }()
		}
	}()
	return p
}

func (p *holdProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
}

func (p *holdProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.gate)
}

// publishSeen notes when the client sends a publish (PUB or HPUB).
type publishSeen struct {
	r    io.Reader
	seen *atomic.Bool
}

func (s publishSeen) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if bytes.Contains(b[:n], []byte("PUB ")) {
		s.seen.Store(true)
	}
	return n, err
}

// gatedReader passes on what the server sent after a publish only once the gate is open.
type gatedReader struct {
	p         *holdProxy
	r         io.Reader
	published *atomic.Bool
}

func (g gatedReader) Read(b []byte) (int, error) {
	n, err := g.r.Read(b)
	if g.published.Load() {
		g.p.mu.Lock()
		gate := g.p.gate
		g.p.mu.Unlock()
		<-gate
	}
	return n, err
}
