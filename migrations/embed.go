// Package migrations holds the schema as golang-migrate SQL files, embedded into the binary
// so that a replica always migrates to exactly the schema its code expects.
package migrations

import "embed"

// FS holds every NNNN_name.up.sql / NNNN_name.down.sql file.
//
//go:embed *.sql
var FS embed.FS
