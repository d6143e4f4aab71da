package targets

import "strings"

// normalHost is how host names are compared: lower case, without the trailing dot of a
// fully-qualified name (which leads to the same place).
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// validHostName accepts DNS names: dot-separated labels of letters, digits, '-' and '_'.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// numericLabel is true for labels such as "1" or "0x7f" that some resolvers read as parts of
// an IPv4 address; no top-level domain looks like that.
func numericLabel(l string) bool {
	digits := "0123456789"
	if hex, ok := strings.CutPrefix(l, "0x"); ok {
		l, digits = hex, "0123456789abcdef"
	}
	return l != "" && strings.Trim(l, digits) == ""
}
