package httpx

import (
	"github.com/go-chi/chi/v5/middleware"
)

// Compress gzips (or deflates) what is worth it for a client that accepts it: the JSON
// answers, problems, the OpenAPI document and the dashboard's files. An open dashboard
// polls several routes every second, so this is most of what it costs on the wire.
// /metrics compresses itself (promhttp), and Compress leaves an encoded answer alone. No
// answer is large enough any more (a page of jobs is at most 500) to need a faster level
// than one for all.
var Compress = middleware.NewCompressor(compressLevel,
	"application/json", "application/problem+json", "application/yaml",
	"text/html", "text/css", "text/javascript", "text/plain").Handler

// compressLevel is gzip's level for every answer.
const compressLevel = 5
