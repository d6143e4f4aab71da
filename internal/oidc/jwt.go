package oidc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// maxHeaderBytes bounds the encoded JOSE header that is decoded before any signature is
// checked, so that a caller cannot make the cheap checks expensive. Real headers hold alg,
// kid and typ: well under a hundred bytes.
const maxHeaderBytes = 4 << 10

// header is the part of a JWT's JOSE header read before verification: for routing a bearer
// token, for refusing a disallowed algorithm with a clear reason, and for naming the key.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// LooksLikeJWT reports whether s has the form of a signed JWT: three base64url parts
// separated by dots, the first a JSON object with an "alg". It checks no signature or claim
// and is cheap; the API uses it to send a bearer token to Verify or to its own token table.
// The signature part may be empty so that an unsigned ("alg": "none") token still goes to
// Verify and is refused there with the reason.
func LooksLikeJWT(s string) bool {
	_, err := parseHeader(s)
	return err == nil
}

// parseHeader checks the compact form of s and decodes its header. The error says what is
// wrong with the form, never what s holds.
func parseHeader(s string) (header, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return header{}, errors.New("a JWT has three parts separated by dots")
	}
	for i, part := range parts {
		if part == "" && i < 2 {
			return header{}, errors.New("the header or the claims part is empty")
		}
		if !base64URL(part) {
			return header{}, errors.New("a part holds characters outside base64url")
		}
	}
	if len(parts[0]) > maxHeaderBytes {
		return header{}, errors.New("the header is too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return header{}, errors.New("the header is not base64url")
	}
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return header{}, errors.New("the header is not a JSON object of strings")
	}
	if h.Alg == "" {
		return header{}, errors.New(`the header has no "alg"`)
	}
	return h, nil
}

// base64URL reports whether s holds only the unpadded base64url alphabet.
func base64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
