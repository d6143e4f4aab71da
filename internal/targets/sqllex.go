package targets

// A SQL job's statements run inside the transaction the runner began, which also commits the
// slot's marker. A statement that ends or splits that transaction (COMMIT; …; BEGIN) would
// commit part of the job without its marker, so such statements are refused, wherever they
// stand in the text: at definition (422) and again before a stored definition runs.
//
// The server parses the whole text of a simple query before it runs any of it, so a SET in
// one statement cannot change how the next is read; what could is the session's
// standard_conforming_strings, which the run's session fixes to on (sqlSessionParams). This
// lexer reads text as the server does with it on: '' quotes, E'' escapes, $tag$ quotes,
// "" identifiers, -- and nested /* */ comments. It splits at every ';' outside them, which
// is at least every place the server splits (it splits fewer, inside BEGIN ATOMIC bodies), so
// each statement the server sees starts where one of these does.

import (
	"fmt"
	"strings"
)

// transactionControl names the statements a job may not run, by their first keyword, and
// the second keyword they need when the first alone is something else (PREPARE name AS …).
var transactionControl = map[string]string{
	"begin": "", "start": "", "commit": "", "end": "", "rollback": "", "abort": "",
	"savepoint": "", "release": "", "prepare": "transaction",
}

// TransactionControl returns, for each statement of text that would end or control the run's
// transaction, a description ("statement 2: COMMIT"); none for text without one.
func TransactionControl(text string) []string {
	var found []string
	for i, words := range statementStarts(text) {
		if len(words) == 0 {
			continue
		}
		second, refused := transactionControl[words[0]]
		if !refused || (second != "" && (len(words) < 2 || words[1] != second)) {
			continue
		}
		shown := words[0]
		if second != "" {
			shown += " " + second
		}
		found = append(found, fmt.Sprintf("statement %d: %s", i+1, strings.ToUpper(shown)))
	}
	return found
}

// TransactionControlError is the reason statements holding transaction control are refused,
// or nil.
func TransactionControlError(text string) error {
	found := TransactionControl(text)
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("%s: a SQL job's statements run in the scheduler's transaction, which commits them with the slot's marker; "+
		"remove BEGIN, START TRANSACTION, COMMIT, END, ROLLBACK, ABORT, SAVEPOINT, RELEASE and PREPARE TRANSACTION", strings.Join(found, ", "))
}

// statementStarts returns, for each statement of text, its first two words, lower-case (fewer
// when it starts with something else: a parenthesis, a quoted identifier).
func statementStarts(text string) [][]string {
	starts := [][]string{nil}
	leading := true // no token of the current statement seen but words
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ';':
			starts = append(starts, nil)
			leading = true
			i++
		case c == '-' && i+1 < len(text) && text[i+1] == '-':
			for i < len(text) && text[i] != '\n' && text[i] != '\r' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			i = skipBlockComment(text, i)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '\'':
			i, leading = skipQuoted(text, i, '\'', false), false
		case c == '"':
			i, leading = skipQuoted(text, i, '"', false), false
		case c == '$':
			i, leading = skipDollar(text, i), false
		case identStart(c):
			j := i + 1
			for j < len(text) && identCont(text[j]) {
				j++
			}
			word := strings.ToLower(text[i:j])
			if (word == "e") && j < len(text) && text[j] == '\'' {
				i, leading = skipQuoted(text, j, '\'', true), false
				continue
			}
			if cur := &starts[len(starts)-1]; leading && len(*cur) < 2 {
				*cur = append(*cur, word)
			}
			i = j
		default:
			i, leading = i+1, false
		}
	}
	return starts
}

// skipBlockComment returns the index after the /* */ comment at i; they nest.
func skipBlockComment(text string, i int) int {
	depth := 0
	for i < len(text) {
		switch {
		case strings.HasPrefix(text[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(text[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// skipQuoted returns the index after the quoted text opening at i with q; a doubled q stands
// for itself, and with backslashes (E”) a backslash escapes the byte after it.
func skipQuoted(text string, i int, q byte, backslashes bool) int {
	for i++; i < len(text); i++ {
		switch {
		case backslashes && text[i] == '\\':
			i++
		case text[i] == q && i+1 < len(text) && text[i+1] == q:
			i++
		case text[i] == q:
			return i + 1
		}
	}
	return i
}

// skipDollar returns the index after the dollar-quoted text at i ($$…$$, $tag$…$tag$), or
// after the '$' when none opens there ($1, an operator).
func skipDollar(text string, i int) int {
	j := i + 1
	if j < len(text) && identStart(text[j]) {
		for j++; j < len(text) && identCont(text[j]) && text[j] != '$'; j++ {
		}
	}
	if j >= len(text) || text[j] != '$' {
		return i + 1
	}
	tag := text[i : j+1]
	end := strings.Index(text[j+1:], tag)
	if end < 0 {
		return len(text)
	}
	return j + 1 + end + len(tag)
}

func identStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func identCont(c byte) bool { return identStart(c) || c >= '0' && c <= '9' || c == '$' }
