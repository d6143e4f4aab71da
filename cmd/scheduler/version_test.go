package main

import (
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// versionLine is the format of `scheduler version`: version, commit (or "unknown"), whether
// the tree was modified, the build date (or the commit's date, or "build date unknown"), and
// the toolchain and platform.
var versionLine = regexp.MustCompile(`^scheduler (\S+) \(commit ([0-9a-f]{40}|unknown)(, modified)?, ` +
	`(built \S+|committed \S+|build date unknown), (go\S+) ([a-z0-9]+/[a-z0-9]+)\)\n$`)

func TestVersionCommandPrintsOneLineOrJSON(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version"} {
		code, out, stderr := runCLI(t, nil, arg)
		require.Equal(t, exitOK, code, stderr)
		assert.Regexp(t, versionLine, out, arg)
	}

	code, out, stderr := runCLI(t, nil, "version", "-o", "json")
	require.Equal(t, exitOK, code, stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	for _, key := range []string{"version", "commit", "modified", "build_date", "commit_date", "go", "platform"} {
		assert.Contains(t, got, key)
	}
	assert.Equal(t, runtime.Version(), got["go"])

	code, _, stderr = runCLI(t, nil, "version", "-o", "yaml")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "-o must be text or json")
}

func TestVersionTakesWhatLdflagsLeaveFromTheToolchainsStamp(t *testing.T) {
	t.Parallel()
	const hash = "b3914b6e897e77d774b651a4ae95e4f4eb30ceb8"
	stamped := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/schedulerhq/scheduler", Version: "v0.0.0-20261127061939-b3914b6e897e+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: hash}, {Key: "vcs.time", Value: "2026-11-27T06:19:39Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	platform := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	cases := []struct {
		name                 string
		version, commit, day string
		info                 *debug.BuildInfo
		want                 string
	}{
		{"release", "v0.5.0", hash, "2026-11-29T05:00:00Z", nil,
			"scheduler v0.5.0 (commit " + hash + ", built 2026-11-29T05:00:00Z, " + platform + ")"},
		{"release over a stamp", "v0.5.0", "0123456789abcdef0123456789abcdef01234567", "2026-11-29T05:00:00Z", stamped,
			"scheduler v0.5.0 (commit 0123456789abcdef0123456789abcdef01234567, modified, built 2026-11-29T05:00:00Z, " + platform + ")"},
		{"dirty release", "v0.5.0-2-gb3914b6-dirty", hash, "2026-11-29T05:00:00Z", nil,
			"scheduler v0.5.0-2-gb3914b6-dirty (commit " + hash + ", modified, built 2026-11-29T05:00:00Z, " + platform + ")"},
		{"plain go build", "dev", "", "", stamped,
			"scheduler v0.0.0-20261127061939-b3914b6e897e+dirty (commit " + hash + ", modified, committed 2026-11-27T06:19:39Z, " + platform + ")"},
		{"no stamp", "dev", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"scheduler dev (commit unknown, build date unknown, " + platform + ")"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line := buildOf(tc.version, tc.commit, tc.day, tc.info).String()
			assert.Equal(t, tc.want, line)
			assert.Regexp(t, versionLine, line+"\n")
		})
	}
}

// TestVersionOfABuiltBinary builds the command as scripts/release.sh does (ldflags), and as a
// plain `go build` does (the toolchain's stamp), and runs `scheduler version` on each.
func TestVersionOfABuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir := t.TempDir()
	build := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		bin := filepath.Join(dir, name)
		// The flags that change what is compiled (-trimpath, CGO_ENABLED, -tags) stay as
		// `go build ./...` had them, so only the link runs again.
		out, err := exec.Command(goTool, append(append([]string{"build", "-o", bin}, args...), ".")...).CombinedOutput()
		if err != nil && strings.Contains(string(out), "error obtaining VCS status") {
			t.Skipf("git cannot read this checkout here (the toolchain cannot stamp it): %s", out)
		}
		require.NoError(t, err, "go build: %s", out)
		return bin
	}
	version := func(t *testing.T, bin string) string {
		t.Helper()
		out, err := exec.Command(bin, "version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Regexp(t, versionLine, string(out))
		return string(out)
	}

	t.Run("release ldflags", func(t *testing.T) {
		const hash = "0123456789abcdef0123456789abcdef01234567"
		bin := build(t, "release", "-buildvcs=false",
			"-ldflags=-s -w -X main.version=v9.9.9-test -X main.commit="+hash+" -X main.date=2026-11-29T05:00:00Z")
		assert.Equal(t, "scheduler v9.9.9-test (commit "+hash+", built 2026-11-29T05:00:00Z, "+
			runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+")\n", version(t, bin))
	})

	t.Run("plain build", func(t *testing.T) {
		// The toolchain stamps a checkout whose .git is a directory (not a git worktree's
		// .git file) when the git command is there; -buildvcs=auto overrides a GOFLAGS that
		// turned it off.
		bin := build(t, "plain", "-buildvcs=auto")
		info, err := buildinfo.ReadFile(bin)
		require.NoError(t, err)
		i := slices.IndexFunc(info.Settings, func(s debug.BuildSetting) bool { return s.Key == "vcs.revision" })
		if i < 0 {
			t.Skip("the toolchain stamped no commit here (no git, or a git worktree)")
		}
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		require.NoError(t, err)
		out := version(t, bin)
		assert.Contains(t, out, "(commit "+strings.TrimSpace(string(head)))
		assert.Contains(t, out, ", committed ")
		assert.NotContains(t, out, "scheduler dev ", "the module's pseudo-version stands for the version")
	})
}

// TestReleaseAndDockerfileBuildAlike: the image holds the same build as `make release`, so
// scripts/release.sh and the Dockerfile pass go build the same environment, flags and
// ldflags (the values aside), and the ldflags set the three variables `scheduler version`
// reads.
func TestReleaseAndDockerfileBuildAlike(t *testing.T) {
	t.Parallel()
	release := goBuildIn(t, "../../scripts/release.sh")
	docker := goBuildIn(t, "../../Dockerfile")
	assert.Equal(t, release, docker, "scripts/release.sh and the Dockerfile build differently")
	assert.Equal(t, []string{"CGO_ENABLED=0"}, release.env, "a static binary")
	assert.Subset(t, release.flags, []string{"-trimpath", "-tags", "timetzdata"})
	assert.Equal(t, []string{"-s", "-w", "-X", "main.version", "-X", "main.commit", "-X", "main.date"}, release.ldflags)
}

// goBuild is a `go build` command of a script, without the values that vary by build: the
// target platform and the ldflags' values.
type goBuild struct {
	env, flags, ldflags []string
}

var (
	ldflagsArg  = regexp.MustCompile(`-ldflags[= ]"([^"]*)"`)
	ldflagsVar  = regexp.MustCompile(`(?m)^ldflags="([^"]*)"$`)
	envAssigned = regexp.MustCompile(`^[A-Z_]+=`)
)

func goBuildIn(t *testing.T, path string) goBuild {
	t.Helper()
	text, err := os.ReadFile(path)
	require.NoError(t, err)
	var cmd string
	for _, line := range strings.Split(strings.ReplaceAll(string(text), "\\\n", " "), "\n") {
		if strings.Contains(line, " go build ") {
			require.Empty(t, cmd, "%s: one go build command", path)
			cmd = line
		}
	}
	require.NotEmpty(t, cmd, "%s: no go build command", path)
	m := ldflagsArg.FindStringSubmatch(cmd)
	require.NotNil(t, m, "%s: go build without -ldflags", path)
	ldflags := m[1]
	if ldflags == "$ldflags" {
		v := ldflagsVar.FindSubmatch(text)
		require.NotNil(t, v, "%s: $ldflags is not set", path)
		ldflags = string(v[1])
	}
	var b goBuild
	before, after, _ := strings.Cut(strings.Replace(cmd, m[0], "", 1), " go build ")
	for _, f := range strings.Fields(before) {
		if envAssigned.MatchString(f) && !strings.HasPrefix(f, "GOOS=") && !strings.HasPrefix(f, "GOARCH=") {
			b.env = append(b.env, f)
		}
	}
	for _, f := range strings.Fields(after) {
		if f == "-o" {
			break
		}
		b.flags = append(b.flags, f)
	}
	for _, f := range strings.Fields(ldflags) {
		name, _, _ := strings.Cut(f, "=")
		b.ldflags = append(b.ldflags, name)
	}
	return b
}
