// Command receiver is the smallest correct target for a runtime HTTP job: it verifies the
// scheduler's Standard Webhooks signature and applies each Idempotency-Key once, so the
// scheduler's at-least-once calls (retries, failovers) have exactly one effect per slot.
// `make run` starts it for the demo job; docs/runtime-jobs.md walks through it.
//
//	RECEIVER_ADDR=127.0.0.1:8099 RECEIVER_SIGNING_SECRET=whsec_... go run ./examples/receiver
package main

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	addr := cmp.Or(os.Getenv("RECEIVER_ADDR"), "127.0.0.1:8099")
	key := signingKey(os.Getenv("RECEIVER_SIGNING_SECRET"))
	var mu sync.Mutex
	done := map[string]bool{} // a real receiver keeps this in its database, with the effect

	http.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if key != nil && !verify(key, r.Header, body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		idem := r.Header.Get("Idempotency-Key")
		mu.Lock()
		seen := done[idem]
		done[idem] = true
		mu.Unlock()
		if seen {
			log.Printf("duplicate %s (attempt %s): already applied", idem, r.Header.Get("X-Scheduler-Attempt"))
			w.WriteHeader(http.StatusOK)
			return
		}
		log.Printf("applied %s for slot %s (run %s, attempt %s): %s", idem, r.Header.Get("X-Scheduler-Scheduled-At"),
			r.Header.Get("X-Scheduler-Run-Id"), r.Header.Get("X-Scheduler-Attempt"), body)
		w.WriteHeader(http.StatusNoContent)
	})
	log.Printf("receiver listening on %s (signature check: %t)", addr, key != nil)
	log.Fatal(http.ListenAndServe(addr, nil))
}

// verify checks webhook-signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>", with a
// timestamp within five minutes, so a captured call cannot be replayed later.
func verify(key []byte, h http.Header, body []byte) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, ts)
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) { // several during a key rotation
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

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
