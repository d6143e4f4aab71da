package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/store"
)

const secretKeyUsage = `Usage:
  scheduler secret-key rotate
      re-seal every secret stored through the API, and every OIDC signing key of the
      targets' tokens, that SCHEDULER_SECRET_KEY did not seal,
      opening it with a key of SCHEDULER_SECRET_KEY_PREVIOUS; print how many it re-sealed
      and which key ids are still in use besides the current one. Safe to run again, and
      while replicas run.

A rotation: (1) make a key (openssl rand -base64 32); (2) on every replica set it as
SCHEDULER_SECRET_KEY and move the old one to SCHEDULER_SECRET_KEY_PREVIOUS, and restart
them one at a time; (3) run this command (DATABASE_URL and both variables set as on the
replicas); (4) once it reports no other key id, remove SCHEDULER_SECRET_KEY_PREVIOUS.

Exit codes: 0 every secret is sealed with the current key; 1 some could not be re-sealed
(their key is not in SCHEDULER_SECRET_KEY_PREVIOUS) or the database failed; 2 usage or
configuration.
`

// secretKeyTimeout bounds the whole command: a page of 100 rows at a time, each re-sealed
// in one statement.
const secretKeyTimeout = 5 * time.Minute

func secretKeyCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, secretKeyUsage)
		return exitOK
	}
	if len(args) != 1 || args[0] != "rotate" {
		fmt.Fprint(stderr, secretKeyUsage)
		return exitUsage
	}
	env := config.NewEnv(environ)
	databaseURL := config.DatabaseURL(env)
	box := config.LoadSecretBox(env)
	if err := env.Err(); err != nil {
		return configError(stderr, err)
	}
	if !box.CanSeal() {
		fmt.Fprintln(stderr, "scheduler: SCHEDULER_SECRET_KEY is not set: set it to the key the replicas seal with (the new one), and SCHEDULER_SECRET_KEY_PREVIOUS to the older keys")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, secretKeyTimeout)
	defer cancel()
	db, err := store.Open(ctx, databaseURL, store.Options{InstanceID: "cli", LeaseTimeout: config.LeaseTimeoutDefault})
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitUsage
	}
	defer db.Close()

	report, err := secrets.Rotate(ctx, db, box)
	fmt.Fprintf(stdout, "re-sealed %d %s with key %s\n", report.Resealed, plural(report.Resealed, "secret"), report.KeyID)
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	for _, e := range report.Unopened {
		fmt.Fprintf(stderr, "scheduler: %v\n", e)
	}
	// The targets' OIDC signing keys are sealed with the same key (internal/idp).
	keys, err := idp.Reseal(ctx, db, box)
	if keys.Resealed > 0 {
		fmt.Fprintf(stdout, "re-sealed %d OIDC signing %s with key %s\n", keys.Resealed, plural(keys.Resealed, "key"), report.KeyID)
	}
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	for _, e := range keys.Unopened {
		fmt.Fprintf(stderr, "scheduler: %v\n", e)
	}
	if len(keys.Unopened) > 0 {
		fmt.Fprintf(stdout, "%d OIDC signing %s could not be re-sealed; SCHEDULER_SECRET_KEY_PREVIOUS is still needed\n", len(keys.Unopened), plural(len(keys.Unopened), "key"))
		return exitFailure
	}
	if len(report.Remaining) == 0 {
		fmt.Fprintf(stdout, "key ids still in use besides %s: none; SCHEDULER_SECRET_KEY_PREVIOUS may be removed\n", report.KeyID)
		return exitOK
	}
	var remaining []string
	for _, id := range slices.Sorted(maps.Keys(report.Remaining)) {
		n := report.Remaining[id]
		remaining = append(remaining, fmt.Sprintf("%s (%d %s)", id, n, plural(n, "secret")))
	}
	fmt.Fprintf(stdout, "key ids still in use besides %s: %s\n", report.KeyID, strings.Join(remaining, ", "))
	return exitFailure
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
