package httpx

import "net/http"

// The job list's answer is about 12 MB at 10 000 jobs. Allocating a buffer that size for
// each request, and copying it into conditionalGET's buffer, cost the memory clearing of
// two fresh 12 MB blocks a request; a replica reuses them instead. A sync.Pool would not
// do: such an answer allocates enough to run the collector, which empties the pool, once or
// twice a request.

// answerBuffers holds up to two big answers' buffers between requests.
var answerBuffers = make(chan []byte, 2)

// bigAnswer is the size from which an answer's buffer is worth reusing.
const bigAnswer = 64 << 10

// AnswerBuffer returns an empty buffer with room for at least n bytes.
func AnswerBuffer(n int) []byte {
	if n >= bigAnswer {
		select {
		case b := <-answerBuffers:
			if cap(b) >= n {
				return b[:0]
			}
		default:
		}
	}
	return make([]byte, 0, n)
}

// releaseAnswerBuffer gives back a buffer that nothing refers to any longer.
func releaseAnswerBuffer(b []byte) {
	if cap(b) >= bigAnswer {
		select {
		case answerBuffers <- b[:0]:
		default: // two are kept already
		}
	}
}

// WriteOwnedJSON answers b, a whole JSON body the caller no longer uses: conditionalGET's
// buffer takes it uncopied when it holds the answer, else it is written and given back.
func WriteOwnedJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if a, ok := w.(*bufferedAnswer); ok && a.adopt(b) {
		return
	}
	_, _ = w.Write(b)
	releaseAnswerBuffer(b)
}
