// Package ui is the operator's dashboard served at /ui/: plain HTML, CSS and JavaScript
// embedded in the binary, so it works with no internet access and needs no build step. It
// reads and acts through the public /v1 API only, so whatever it shows or does, the API can.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the dashboard's files under the /ui/ prefix. No file holds a secret: the
// API token is asked for in the page and kept in the tab's sessionStorage.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Same-origin only, and revalidated on every load so an upgraded replica serves its
		// own script, not a cached one speaking an older API.
		w.Header().Set("Content-Security-Policy",
			"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
