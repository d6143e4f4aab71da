package targets

import (
	"testing"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
