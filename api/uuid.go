package api

import "strings"

// isUUIDv4 checks the lower-case canonical form xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx.
func isUUIDv4(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return s[14] == '4' && strings.IndexByte("89ab", s[19]) >= 0
}
