// Package natstest runs a real NATS server with JetStream inside a test's process, for the
// tests of NATS jobs: the server of github.com/nats-io/nats-server, not a fake of it. Only
// tests import it.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// readyTimeout bounds a server's start.
const readyTimeout = 10 * time.Second

// Server is a NATS server with JetStream on 127.0.0.1, stopped when the test ends.
type Server struct {
	*server.Server
	URL string // nats://127.0.0.1:PORT
	// ClientOptions are given to every client the test's helpers make (a TLS server's roots).
	ClientOptions []nats.Option
}

// Start starts a server with JetStream, its store in the test's temporary directory.
// opts, when given, adjusts the options first (users, TLS...).
func Start(t testing.TB, opts ...func(*server.Options)) *Server {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true}
	for _, f := range opts {
		f(o)
	}
	s, err := server.NewServer(o)
	require.NoError(t, err)
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	require.True(t, s.ReadyForConnections(readyTimeout), "the NATS server did not start within %s", readyTimeout)
	return &Server{Server: s, URL: s.ClientURL()}
}

// Connect is a client of the server, closed when the test ends; options as nats.Connect's
// (credentials).
func (s *Server) Connect(t testing.TB, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.URL, append(append([]nats.Option{}, s.ClientOptions...), opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// AddStream makes a stream capturing subjects, whose duplicate window is a minute.
func (s *Server) AddStream(t testing.TB, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	st, err := s.Connect(t).CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects,
		Duplicates: time.Minute})
	require.NoError(t, err)
	return st
}

// Message is one message of a stream.
type Message struct {
	Subject, MsgID string
	Data           string
	Header         nats.Header
	Sequence       uint64
}

// Messages reads every message the stream holds, in order.
func Messages(t testing.TB, st jetstream.Stream) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	info, err := st.Info(ctx)
	require.NoError(t, err)
	var out []Message
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // a deleted one
		}
		out = append(out, Message{Subject: m.Subject, MsgID: m.Header.Get(jetstream.MsgIDHeader),
			Data: string(m.Data), Header: m.Header, Sequence: m.Sequence})
	}
	return out
}
