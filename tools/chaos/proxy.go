package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// proxy is a TCP relay between one replica and PostgreSQL that can turn into a blackhole:
// every byte is dropped both ways while every connection stays open, so neither end sees a
// reset and each has to notice the silence itself (the silent partition). A close from
// either end is still passed on, as a network that drops data but carries the close would.
type proxy struct {
	ln       net.Listener
	dropping atomic.Bool

	mu       sync.Mutex
	upstream string
	conns    map[net.Conn]struct{}
}

// startProxy listens on a free loopback port and relays every connection to upstream.
func startProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr is where replicas connect.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Cut drops every byte from now on; Heal lets them through again. The streams that lost
// bytes are broken for good: the clients notice and reconnect.
func (p *proxy) Cut()  { p.dropping.Store(true) }
func (p *proxy) Heal() { p.dropping.Store(false) }

// Switch sends every new connection to upstream and closes the relayed ones, as a
// failover's stable address (a DNS name, a virtual IP, a Patroni-aware proxy) moves to the
// promoted server: the clients notice their connections drop and reconnect.
func (p *proxy) Switch(upstream string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = upstream
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops listening and closes every relayed connection.
func (p *proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.relay(client)
	}
}

func (p *proxy) relay(client net.Conn) {
	p.mu.Lock()
	upstream := p.upstream
	p.mu.Unlock()
	server, err := net.Dial("tcp", upstream)
	if err != nil {
		_ = client.Close()
		return
	}
	p.track(client, server)
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = client.Close()
			_ = server.Close()
			p.untrack(client, server)
		})
	}
	go func() { p.pipe(server, client); closeBoth() }()
	p.pipe(client, server)
	closeBoth()
}

// pipe copies src to dst until src ends, dropping what it reads while cut.
func (p *proxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.dropping.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}
