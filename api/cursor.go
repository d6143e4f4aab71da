package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// filterFingerprint ties a cursor to its query, so a cursor reused with other filters is
// refused instead of silently skipping rows.
func filterFingerprint(f store.RunFilter) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", f.Job, f.Status, f.Trigger)
	for _, t := range []*time.Time{f.Since, f.Until} {
		if t != nil {
			fmt.Fprint(h, t.UnixNano())
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// A cursor is base64url("<last id>.<filter fingerprint>"); clients treat it as opaque.
func encodeCursor(id int64, fp string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10) + "." + fp))
}

func decodeCursor(c, fp string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	idText, gotFP, ok := strings.Cut(string(b), ".")
	if !ok || gotFP != fp {
		return 0, false
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}

// A job list's cursor is base64url("job." + the last job's name); clients treat it as
// opaque. A name is not a position: a job deleted meanwhile does not move the next page.
func encodeJobCursor(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("job." + name))
}

func decodeJobCursor(c string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", false
	}
	name, ok := strings.CutPrefix(string(b), "job.")
	// Only a job's name can be one: anything else (a NUL, invalid UTF-8) would reach the
	// database as text it refuses, and answer 503 for the client's mistake.
	return name, ok && namespace.ValidKey(name)
}
