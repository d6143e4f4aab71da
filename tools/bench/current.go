package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// measuredAt names the run a row of the current table comes from.
type measuredAt struct{ commit, machine, date string }

// machineName is the machine's short name in the current table: its CPU and cores.
func machineName() string { return fmt.Sprintf("%s, %d cores", cpuModel(), runtime.NumCPU()) }

// currentRow is a row of BENCHMARKS.md's current table: the measurement, its figure and
// verdict, and the run it comes from.
func currentRow(x row, at measuredAt) string {
	figure := x.value
	if x.ratio != "" {
		figure = fmt.Sprintf("%s (%s ÷ %s)", x.ratio, x.value, x.ref)
	}
	result := "MISS"
	if *x.pass {
		result = "PASS"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |",
		cell(x.name), cell(x.data), cell(figure), cell(x.target), result, cell(at.commit), cell(at.machine), at.date)
}

// updateCurrent returns md, BENCHMARKS.md, with each row of rows that has a target in its
// current table: replacing the row of the same measurement, or added at the table's end. The
// other rows keep the run that measured them, so the table never claims a commit for a
// figure that commit did not produce.
func updateCurrent(md string, rows []row, at measuredAt) (string, error) {
	lines := strings.Split(md, "\n")
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "| measurement | data | figure | target | result | commit | machine | date |") {
			head = i
			break
		}
	}
	if head < 0 {
		return "", fmt.Errorf("no current table (| measurement | data | figure | ... |) found")
	}
	end := head + 2 // past the header and its separator
	for end < len(lines) && strings.HasPrefix(lines[end], "| ") {
		end++
	}
	for _, x := range rows {
		if x.pass == nil {
			continue
		}
		line, key := currentRow(x, at), "| "+cell(x.name)+" |"
		found := false
		for i := head + 2; i < end; i++ {
			if strings.HasPrefix(lines[i], key) {
				lines[i], found = line, true
				break
			}
		}
		if !found {
			lines = append(lines[:end], append([]string{line}, lines[end:]...)...)
			end++
		}
	}
	return strings.Join(lines, "\n"), nil
}

// writeReport updates the current table in out with a full run's rows (a quick run's
// reduced sizes answer no target) and adds the run's report at the end of history.
func writeReport(out, history, report string, r *report, at measuredAt) error {
	if !r.quick {
		md, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		updated, err := updateCurrent(string(md), r.rows, at)
		if err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		if err := os.WriteFile(out, []byte(updated), 0o644); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(history, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("\n" + report); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
