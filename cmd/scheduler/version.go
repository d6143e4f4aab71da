package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version, commit and date are set at build time by scripts/release.sh and the Dockerfile,
// with the same flags:
//
//	-ldflags "-X main.version=v1.2.0 -X main.commit=<full hash> -X main.date=<RFC 3339 UTC>"
//
// A plain `go build` in a git checkout sets none of them; the Go toolchain then stamps the
// commit (vcs.revision, vcs.time, vcs.modified) and a pseudo-version into the binary, and
// buildOf reads them from there, so an operator can always tell which source a binary is.
var (
	version = "dev"
	commit  string
	date    string
)

// build says which source a binary was built from; `scheduler version` prints it.
type build struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Modified: the tree had uncommitted changes (vcs.modified, or a version from
	// `git describe --dirty`).
	Modified bool `json:"modified"`
	// BuildDate is when the release was built (set by ldflags only); CommitDate is the
	// commit's own time, from the toolchain's stamp.
	BuildDate  string `json:"build_date"`
	CommitDate string `json:"commit_date"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// currentBuild is this binary's build: what ldflags set, and the toolchain's stamp for the rest.
func currentBuild() build {
	info, _ := debug.ReadBuildInfo()
	return buildOf(version, commit, date, info)
}

// buildOf fills what ldflags left unset from the toolchain's stamp (info may be nil: a test
// binary has none).
func buildOf(version, commit, date string, info *debug.BuildInfo) build {
	b := build{Version: version, Commit: commit, BuildDate: date, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info != nil {
		// Since Go 1.24 the main module's version is derived from its tag or commit
		// (v0.0.0-20261129045418-b3914b6e897e+dirty); "(devel)" means there was none.
		if b.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				b.CommitDate = s.Value
			case "vcs.modified":
				b.Modified = b.Modified || s.Value == "true"
			}
		}
	}
	b.Modified = b.Modified || strings.HasSuffix(b.Version, "-dirty") || strings.HasSuffix(b.Version, "+dirty")
	return b
}

// String is the one line `scheduler version` prints:
//
//	scheduler v1.2.0 (commit 0123…cdef, built 2026-11-29T05:00:00Z, go1.26.8 linux/amd64)
//
// A plain build says "committed" and the commit's time instead, as it has no build date.
func (b build) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "scheduler %s (commit ", b.Version)
	if b.Commit == "" {
		s.WriteString("unknown")
	} else {
		s.WriteString(b.Commit)
	}
	if b.Modified {
		s.WriteString(", modified")
	}
	switch {
	case b.BuildDate != "":
		fmt.Fprintf(&s, ", built %s", b.BuildDate)
	case b.CommitDate != "":
		fmt.Fprintf(&s, ", committed %s", b.CommitDate)
	default:
		s.WriteString(", build date unknown")
	}
	fmt.Fprintf(&s, ", %s %s)", b.Go, b.Platform)
	return s.String()
}

// versionCmd prints the build: one line, or JSON with -o json.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("o", "text", "output: text or json")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprint(w, "Usage: scheduler version [-o text|json]\n\nPrint the version, commit and build date of this binary.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.Usage = func() {} // printed below, on stdout for --help and on stderr for a mistake
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return exitOK
	} else if err != nil {
		usage(stderr)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scheduler version: takes no arguments, got %q\n", fs.Args())
		return exitUsage
	}
	b := currentBuild()
	switch *output {
	case "text":
		fmt.Fprintln(stdout, b)
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(b); err != nil {
			fmt.Fprintln(stderr, "scheduler version:", err)
			return exitFailure
		}
	default:
		fmt.Fprintf(stderr, "scheduler version: -o must be text or json, not %q\n", *output)
		return exitUsage
	}
	return exitOK
}
