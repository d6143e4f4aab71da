// Package ui is the operator's dashboard served at /ui/: plain HTML, CSS and JavaScript
// embedded in the binary, so it works with no internet access and needs no build step. It
// reads and acts through the public /v1 API only, so whatever it shows or does, the API can.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// authMeta is index.html's placeholder for whether the API wants a token.
const authMeta = `<meta name="scheduler-auth" content="unknown">`

// Handler serves the dashboard's files under the /ui/ prefix. No file holds a secret: the
// API token is asked for in the page and kept in the tab's sessionStorage. tokenRequired
// is written into the page, so the page asks for the token before sending a request that
// would be refused (a 401 is an error in the browser's console).
func Handler(tokenRequired bool) http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	auth := "none"
	if tokenRequired {
		auth = "bearer"
	}
	index = bytes.Replace(index, []byte(authMeta), []byte(`<meta name="scheduler-auth" content="`+auth+`">`), 1)
	// index.html itself redirects to /ui/ (FileServer's rule), so its tag is the page's.
	tags := etags(sub)
	delete(tags, "index.html")
	indexTag := etag(index)

	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Same-origin only, and revalidated on every load (no-cache, with an ETag, so an
		// unchanged file costs a 304) so an upgraded replica serves its own script, not a
		// cached one speaking an older API.
		w.Header().Set("Content-Security-Policy",
			"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-cache")
		// ServeContent (under FileServer too) answers If-None-Match against this ETag.
		if r.URL.Path == "/ui/" {
			w.Header().Set("ETag", indexTag)
			http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(index))
			return
		}
		if tag, ok := tags[strings.TrimPrefix(r.URL.Path, "/ui/")]; ok {
			w.Header().Set("ETag", tag)
		}
		files.ServeHTTP(w, r)
	})
}

// etags hashes every embedded file once: the files cannot change while the process runs.
func etags(files fs.FS) map[string]string {
	tags := map[string]string{}
	_ = fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		tags[path] = etag(b)
		return nil
	})
	return tags
}

// etag is weak: the gzip-compressed and the plain file are one content in two encodings.
func etag(b []byte) string {
	sum := sha256.Sum256(b)
	return `W/"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
}
