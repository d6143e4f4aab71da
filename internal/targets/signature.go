package targets

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// SignatureKey turns a signing secret into the HMAC key, as Standard Webhooks libraries do:
// "whsec_<base64>" is the decoded bytes, so that a receiver can paste the same secret into its
// library; anything else (including a "whsec_" value that is not base64) is the value's bytes.
func SignatureKey(secret string) []byte {
	if encoded, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if key, err := base64.StdEncoding.DecodeString(encoded); err == nil {
			return key
		}
	}
	return []byte(secret)
}

// Sign is the Standard Webhooks signature of one delivery: "v1," and the base64 (standard
// alphabet) HMAC-SHA256 of "<id>.<timestamp>.<body>".
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
