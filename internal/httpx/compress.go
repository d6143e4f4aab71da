package httpx

import (
	"compress/flate"
	"compress/gzip"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"
)

// Compress gzips (or deflates) what is worth it for a client that accepts it: the JSON
// answers, problems, the OpenAPI document and the dashboard's files. An open dashboard
// polls several routes every second, so this is most of what it costs on the wire.
// /metrics compresses itself (promhttp), and Compress leaves an encoded answer alone.
var Compress = newCompressor()

// compressLevel is the level of every answer but the big ones (fastLevelFrom).
const compressLevel = 5

// fastLevelFrom is the size of a first write from which gzip works at its fastest level:
// level 5 took about 100 ms of CPU over the unpaged job list of 10 000 jobs (12 MB), level
// 1 about 25 ms for an answer 1.6 times as large (360 kB instead of 230 kB). A buffered
// answer (conditionalGET) comes in one write.
const fastLevelFrom = 1 << 20

func newCompressor() func(next http.Handler) http.Handler {
	c := middleware.NewCompressor(compressLevel,
		"application/json", "application/problem+json", "application/yaml",
		"text/html", "text/css", "text/javascript", "text/plain")
	c.SetEncoder("gzip", func(w io.Writer, level int) io.Writer { return &sizedGzip{dst: w} })
	return c.Handler
}

// sizedGzip is a gzip writer that picks its level at the first write, by its size. chi
// keeps it in a pool and Resets it for each answer.
type sizedGzip struct {
	dst          io.Writer
	gz           *gzip.Writer // nil until the first write
	normal, fast *gzip.Writer // kept across answers
}

func (z *sizedGzip) Write(p []byte) (int, error) {
	if z.gz == nil {
		z.start(len(p) >= fastLevelFrom)
	}
	return z.gz.Write(p)
}

func (z *sizedGzip) start(big bool) {
	pick, level := &z.normal, compressLevel
	if big {
		pick, level = &z.fast, flate.BestSpeed
	}
	if *pick == nil {
		*pick, _ = gzip.NewWriterLevel(z.dst, level) // a level in range never fails
	} else {
		(*pick).Reset(z.dst)
	}
	z.gz = *pick
}

// Reset starts an answer written to w.
func (z *sizedGzip) Reset(w io.Writer) {
	z.dst, z.gz = w, nil
}

// Flush flushes what was written; before the first write there is nothing to flush.
func (z *sizedGzip) Flush() error {
	if z.gz == nil {
		return nil
	}
	return z.gz.Flush()
}

// Close ends the gzip stream: an empty answer still gets a valid (empty) one.
func (z *sizedGzip) Close() error {
	if z.gz == nil {
		z.start(false)
	}
	return z.gz.Close()
}
