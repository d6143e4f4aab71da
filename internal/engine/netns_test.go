package engine

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// netnsLink is a network namespace joined to this one by a veth pair on a private /30: the
// host side (HostAddr) is where PostgreSQL listens, the namespace side is the only way
// out of the namespace. Cut drops every packet silently, as a partition does.
type netnsLink struct {
	Name     string // the namespace, for `ip netns exec`
	HostAddr string
	Subnet   string // the /30, for pg_hba.conf
	hostIf   string
	nsIf     string
}

// newNetnsLink makes the namespace and its link, removed when the test ends. It skips the
// test, saying why, where namespaces cannot be made (not root, no ip(8), no permission).
func newNetnsLink(t *testing.T) *netnsLink {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the network-namespace partition needs root (ip netns); TestPartitionedLeaderCannotCommitAfterTakeover covers the silent partition through a proxy")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the network-namespace partition needs ip(8) from iproute2; TestPartitionedLeaderCannotCommitAfterTakeover covers the silent partition through a proxy")
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	// 10.213.0.0/16 in /30s: 16384 links, picked at random so parallel tests do not collide.
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<14))
	base := int(n.Int64()) * 4
	host := fmt.Sprintf("10.213.%d.%d", base/256, base%256+1)
	l := &netnsLink{
		Name: "sched-" + id, HostAddr: host,
		Subnet: fmt.Sprintf("10.213.%d.%d/30", base/256, base%256),
		hostIf: "vsh" + id, nsIf: "vsn" + id,
	}
	nsAddr := fmt.Sprintf("10.213.%d.%d/30", base/256, base%256+2)
	if out, err := exec.Command("ip", "netns", "add", l.Name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace here (%v: %s); TestPartitionedLeaderCannotCommitAfterTakeover covers the silent partition through a proxy", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", l.hostIf).Run()
		_ = exec.Command("ip", "netns", "del", l.Name).Run()
	})
	for _, args := range [][]string{
		{"link", "add", l.hostIf, "type", "veth", "peer", "name", l.nsIf},
		{"link", "set", l.nsIf, "netns", l.Name},
		{"addr", "add", host + "/30", "dev", l.hostIf},
		{"link", "set", l.hostIf, "up"},
		{"netns", "exec", l.Name, "ip", "addr", "add", nsAddr, "dev", l.nsIf},
		{"netns", "exec", l.Name, "ip", "link", "set", l.nsIf, "up"},
		{"netns", "exec", l.Name, "ip", "link", "set", "lo", "up"},
	} {
		l.ip(t, args...)
	}
	return l
}

// Cut takes the namespace's side of the link down: packets are dropped, no connection is
// closed or reset, and each end has to notice the silence by itself.
func (l *netnsLink) Cut(t *testing.T) {
	l.ip(t, "netns", "exec", l.Name, "ip", "link", "set", l.nsIf, "down")
}

// Heal brings the link back.
func (l *netnsLink) Heal(t *testing.T) {
	l.ip(t, "netns", "exec", l.Name, "ip", "link", "set", l.nsIf, "up")
}

func (l *netnsLink) ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
