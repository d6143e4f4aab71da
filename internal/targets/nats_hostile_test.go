package targets

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileNATS is a server that speaks NATS until the client publishes, then answers with
// what it is given: a job's target is anyone's server.
func hostileNATS(t *testing.T, answer string) string {
	return hostileNATSWithInfo(t, `{"server_id":"hostile","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}`, answer)
}

// hostileNATSWithInfo is hostileNATS announcing itself with info.
func hostileNATSWithInfo(t *testing.T, info, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.Write([]byte("INFO " + info + "\r\n"))
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					switch {
					case strings.HasPrefix(line, "PING"):
						conn.Write([]byte("PONG\r\n"))
					case (strings.HasPrefix(line, "HPUB") || strings.HasPrefix(line, "PUB")) && answer == "":
						return // the connection drops
					case strings.HasPrefix(line, "HPUB"), strings.HasPrefix(line, "PUB"):
						conn.Write([]byte(answer))
					}
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

// The attack: a server announces a message of 2^62 bytes. The NATS client sizes its buffer
// by the announcement, which would end the whole replica (a panic in the client's reader,
// or memory exhausted); the attempt fails instead, saying why.
func TestPublishRefusesAnOversizedAnswer(t *testing.T) {
	for name, answer := range map[string]string{
		"message":    "MSG _INBOX.x 1 4611686018427387904\r\nabc",
		"header msg": "HMSG _INBOX.x 1 10 4611686018427387904\r\nabc",
		"long line":  "+OK " + strings.Repeat("x", 1<<20) + "\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			url := hostileNATS(t, answer)
			r := natsRequest(url, "k")
			r.Retry = RetryPolicy{MaxAttempts: 1}
			res := loopbackCaller(t, Config{}).Publish(testCtx(t), r)
			require.Error(t, res.Err)
			assert.Contains(t, res.Attempts[0].Error, "the server broke the NATS protocol")
		})
	}
}

// The attack: a server advertises other servers (connect_urls) and drops the connection as
// the client publishes, to lead it to an address the definition did not name (here one the
// guard allows, so only the client's options stand in the way). The client neither adds
// the advertised servers nor reconnects: the other address is never dialled.
func TestPublishIgnoresAdvertisedServers(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	accepted := make(chan struct{}, 1)
	go func() {
		if conn, err := other.Accept(); err == nil {
			accepted <- struct{}{}
			conn.Close()
		}
	}()
	info := `{"server_id":"hostile","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576,"connect_urls":["` + other.Addr().String() + `"]}`
	url := hostileNATSWithInfo(t, info, "")
	r := natsRequest(url, "k")
	r.Retry = RetryPolicy{MaxAttempts: 1}
	r.AttemptTimeout = time.Second
	res := loopbackCaller(t, Config{}).Publish(testCtx(t), r)
	require.Error(t, res.Err)
	select {
	case <-accepted:
		t.Fatal("the client dialled a server it was only told of")
	default:
	}
}
