// Command receiver is the smallest correct target for a runtime HTTP job: it verifies the
// scheduler's Standard Webhooks signature and applies each Idempotency-Key once, so the
// scheduler's at-least-once calls (retries, failovers) have exactly one effect per slot.
// `make run` starts it for the demo jobs; docs/runtime-jobs.md walks through it.
//
//	RECEIVER_ADDR=127.0.0.1:8099 RECEIVER_SIGNING_SECRET=whsec_... go run ./examples/receiver
//
// checks every call with one secret. `make run` gives it a key file instead
// (RECEIVER_KEY_FILE), from which each namespace of the demo cluster has a signing secret of
// its own: a call to /ns/NAMESPACE/… is checked with NAMESPACE's, any other path with
// default's, and
//
//	receiver secret NAMESPACE
//
// prints NAMESPACE's, for a team to store as its job's signing secret (no restart: the
// receiver derives it on each call). A path ending in /fail answers 503, for a demo of a
// failing job. Every call it refuses is logged with the reason.
package main

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	keyFile := cmp.Or(os.Getenv("RECEIVER_KEY_FILE"), ".run/receiver.key")
	if len(os.Args) == 3 && os.Args[1] == "secret" {
		printSecret(keyFile, os.Args[2])
		return
	}
	if len(os.Args) > 1 {
		log.Fatalf("usage: receiver (serve; RECEIVER_ADDR, RECEIVER_SIGNING_SECRET or RECEIVER_KEY_FILE) | receiver secret NAMESPACE")
	}
	addr := cmp.Or(os.Getenv("RECEIVER_ADDR"), "127.0.0.1:8099")
	keys := keysFrom(os.Getenv("RECEIVER_SIGNING_SECRET"), os.Getenv("RECEIVER_KEY_FILE"))
	var mu sync.Mutex
	done := map[string]bool{} // a real receiver keeps this in its database, with the effect

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		refuse := func(status int, reason string) {
			log.Printf("refused %s %s (%d): %s", r.Method, r.URL.Path, status, reason)
			http.Error(w, reason, status)
		}
		if r.Method != http.MethodPost {
			refuse(http.StatusMethodNotAllowed, "only POST is accepted")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			refuse(http.StatusBadRequest, "reading the body failed: "+err.Error())
			return
		}
		if keys != nil {
			ns, key, err := keys.forPath(r.URL.Path)
			if err == nil {
				err = verify(key, r.Header, body)
			}
			if errors.Is(err, errNoMatch) {
				err = fmt.Errorf("%w %s", err, keys.whose(ns))
			}
			if err != nil {
				refuse(http.StatusUnauthorized, fmt.Sprintf("signature of namespace %s: %v", ns, err))
				return
			}
		}
		if strings.HasSuffix(r.URL.Path, "/fail") {
			// For a demo of a failing job (and its notification): a real receiver fails when
			// it could not apply the call, and the scheduler retries it under the same key.
			refuse(http.StatusServiceUnavailable, "failing on purpose: the path ends in /fail")
			return
		}
		// A job's call carries its slot's Idempotency-Key; a notification has its webhook-id.
		idem := cmp.Or(r.Header.Get("Idempotency-Key"), r.Header.Get("webhook-id"))
		mu.Lock()
		seen := done[idem]
		done[idem] = true
		mu.Unlock()
		if seen {
			log.Printf("duplicate %s (attempt %s): already applied", idem, r.Header.Get("X-Scheduler-Attempt"))
			w.WriteHeader(http.StatusOK)
			return
		}
		what := "notification" // a job's call names its run; a notification does not
		if run := r.Header.Get("X-Scheduler-Run-Id"); run != "" {
			what = fmt.Sprintf("run %s, slot %s, attempt %s", run,
				cmp.Or(r.Header.Get("X-Scheduler-Scheduled-At"), "none (run by hand)"), r.Header.Get("X-Scheduler-Attempt"))
		}
		log.Printf("applied %s %s (%s): %s", r.URL.Path, idem, what, body)
		w.WriteHeader(http.StatusNoContent)
	})
	log.Printf("receiver listening on %s (signature check: %s)", addr, keys.describe())
	log.Fatal(http.ListenAndServe(addr, nil))
}

// signingKeys are the keys the receiver checks calls with: one for every call, or one per
// namespace derived from a key of its own.
type signingKeys struct {
	one    []byte // RECEIVER_SIGNING_SECRET
	master []byte // RECEIVER_KEY_FILE's key
}

func keysFrom(secret, keyFile string) *signingKeys {
	switch {
	case secret != "":
		return &signingKeys{one: signingKey(secret)}
	case keyFile != "":
		master, err := readMaster(keyFile)
		if err != nil {
			log.Fatal(err)
		}
		return &signingKeys{master: master}
	}
	return nil
}

func (k *signingKeys) describe() string {
	switch {
	case k == nil:
		return "none"
	case k.one != nil:
		return "one secret (RECEIVER_SIGNING_SECRET)"
	}
	return "a secret per namespace; `receiver secret NAMESPACE` prints one"
}

// whose names the secret a call of namespace ns must be signed with.
func (k *signingKeys) whose(ns string) string {
	if k.one != nil {
		return "RECEIVER_SIGNING_SECRET"
	}
	return fmt.Sprintf("the secret of namespace %s: the job's signing_secret must hold what `bin/receiver secret %s` prints", ns, ns)
}

var nsPath = regexp.MustCompile(`^/ns/([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(/|$)`)

// forPath returns the namespace a call's path names (/ns/NAMESPACE/…; default otherwise)
// and the key its calls are signed with.
func (k *signingKeys) forPath(path string) (string, []byte, error) {
	ns := "default"
	if m := nsPath.FindStringSubmatch(path); m != nil {
		ns = m[1]
	} else if strings.HasPrefix(path, "/ns/") {
		return path, nil, errors.New("the path names no valid namespace: call /ns/NAMESPACE/…")
	}
	if k.one != nil {
		return ns, k.one, nil
	}
	return ns, signingKey(namespaceSecret(k.master, ns)), nil
}

// namespaceSecret is namespace ns's signing secret, derived from the receiver's key.
func namespaceSecret(master []byte, ns string) string {
	mac := hmac.New(sha256.New, master)
	fmt.Fprintf(mac, "demo receiver signing secret of namespace %s", ns)
	return "whsec_" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// readMaster reads the key file, making it (32 random bytes) when it does not exist yet, so
// the secrets stay the same from one start to the next.
func readMaster(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b = make([]byte, 32)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		if err = os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("receiver: make the key file %s: %w", path, err)
		}
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receiver: read the key file %s: %w", path, err)
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) < 16 {
		return nil, fmt.Errorf("receiver: the key file %s does not hold a base64 key of 16 bytes or more; delete it to make a new one", path)
	}
	return k, nil
}

func printSecret(keyFile, ns string) {
	if nsPath.FindString("/ns/"+ns) == "" {
		log.Fatalf("receiver: %q is not a namespace name (lower-case letters, digits and '-')", ns)
	}
	master, err := readMaster(keyFile)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(namespaceSecret(master, ns))
}

// verify checks webhook-signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>", with a
// timestamp within five minutes, so a captured call cannot be replayed later. It says why a
// call fails the check.
func verify(key []byte, h http.Header, body []byte) error {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	if h.Get("webhook-signature") == "" {
		return errors.New("the call has no webhook-signature header: give the job a signing_secret")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not a Unix time", ts)
	}
	if age := time.Since(time.Unix(sec, 0)); age.Abs() > 5*time.Minute {
		return fmt.Errorf("webhook-timestamp is %s away from now, more than 5 minutes (a replay, or a clock off)", age.Round(time.Second))
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, ts)
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) { // several during a key rotation
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errNoMatch
}

var errNoMatch = errors.New("no signature matches")

// signingKey decodes a "whsec_<base64>" secret as Standard Webhooks does; any other value is
// used as it is.
func signingKey(secret string) []byte {
	if secret == "" {
		return nil
	}
	if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return k
		}
	}
	return []byte(secret)
}
