package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
)

const (
	// fetchTimeout bounds one request to the issuer. go-oidc fetches keys under a context
	// without a deadline and makes every caller wait on the fetch in flight, so a request
	// that hung would hang every later refresh.
	fetchTimeout = 10 * time.Second
	// maxDocumentBytes bounds a discovery document or key set read into memory; real ones
	// are a few kilobytes.
	maxDocumentBytes = 1 << 20
	// keyRefreshIntervalDefault is how long a fetched key set is served again instead of
	// fetched. go-oidc fetches the keys again for every token its cached keys do not verify,
	// so without this anyone could make each replica call the issuer once per forged token.
	// A key the issuer has just added is found at most this long after it was published.
	keyRefreshIntervalDefault = 10 * time.Second
)

// documentTransport fetches a discovery document or key set for go-oidc, and makes what
// go-oidc would otherwise report loosely into errors the Verifier can classify and an
// operator can read: a refusal by status (without the body, which may be a large HTML
// page), an over-long body, or a body that is not the JSON expected.
type documentTransport struct {
	base http.RoundTripper
	log  *slog.Logger
	// keySet is set on the transport that fetches keys: their body must hold "keys", and
	// a key set fetched less than refreshInterval ago is served again.
	keySet bool

	mu              sync.Mutex
	refreshInterval time.Duration
	fetched         time.Time // when keys was fetched; zero before
	keys            []byte    // the last key set fetched
}

func (t *documentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.keySet {
		// The recent set is served rather than an error: go-oidc would report an error
		// as the token's, and a Verify that read the cache just before it was filled
		// would be refused although the keys it needs are here.
		t.mu.Lock()
		recent := t.keys != nil && time.Since(t.fetched) < t.refreshInterval
		keys := t.keys
		t.mu.Unlock()
		if recent {
			return jsonResponse(req, keys), nil
		}
	}
	ctx, cancel := context.WithTimeout(req.Context(), fetchTimeout)
	defer cancel()
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.log.Warn("oidc: fetching from the issuer failed", "url", req.URL.Redacted(), "error", err)
		return nil, err
	}
	// Redirects go back to the client, which follows them.
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	resp.Body.Close()
	switch {
	case err != nil:
		err = fmt.Errorf("reading the answer: %w", err)
	case resp.StatusCode != http.StatusOK:
		err = fmt.Errorf("the issuer answered %s", resp.Status)
	case len(body) > maxDocumentBytes:
		err = fmt.Errorf("the answer is longer than %d bytes", maxDocumentBytes)
	default:
		err = checkDocument(body, t.keySet)
	}
	if err != nil {
		t.log.Warn("oidc: fetching from the issuer failed", "url", req.URL.Redacted(), "error", err)
		return nil, err
	}
	if t.keySet {
		t.mu.Lock()
		t.fetched, t.keys = time.Now(), body
		t.mu.Unlock()
	}
	return jsonResponse(req, body), nil
}

// jsonResponse is a 200 answer to req with body, read in full already.
func jsonResponse(req *http.Request, body []byte) *http.Response {
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// checkDocument reports a body that go-oidc could not read as a discovery document or,
// when keySet, as a key set.
func checkDocument(body []byte, keySet bool) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return errors.New("the answer is not a JSON object")
	}
	if !keySet {
		return nil
	}
	var keys []json.RawMessage
	if err := json.Unmarshal(doc["keys"], &keys); err != nil || keys == nil {
		return errors.New(`the answer is not a key set: it has no "keys" array`)
	}
	return nil
}

// withTransport returns a copy of client that fetches through t, keeping the client's own
// redirect policy and timeout.
func withTransport(client *http.Client, t *documentTransport) *http.Client {
	c := *client
	c.Transport = t
	return &c
}

// keySetErrorKey carries, in a Verify call's context, where keySet records the key set's
// error: go-oidc reports it only as text (%v), which loses whether the issuer could not be
// reached (503) or the token's signature is wrong (401).
type keySetErrorKey struct{}

// keySet is go-oidc's remote key set, with its error kept for Verify.
type keySet struct {
	remote *gooidc.RemoteKeySet
}

func (k keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.remote.VerifySignature(ctx, jwt)
	if slot, ok := ctx.Value(keySetErrorKey{}).(*error); ok {
		*slot = err
	}
	return payload, err
}
