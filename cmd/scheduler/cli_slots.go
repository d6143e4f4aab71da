package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/schedulerhq/scheduler/internal/logging"
)

// scheduler slots NAME and scheduler notifications NAME: what became of each slot of a
// window, and what the job's notify rules sent.

func slotsFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	since := fs.String("since", "", "the first slot time (RFC 3339, e.g. 2026-11-24T00:00:00Z); default 24 hours before --until")
	until := fs.String("until", "", "the last slot time (RFC 3339); default now")
	return func(ctx context.Context, x *cli, args []string) int {
		s, err := x.c.ListSlots(ctx, args[0], *since, *until)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(s)
		}
		fmt.Fprintf(x.stdout, "slots of %s%s from %s to %s\n", args[0], x.inNamespace(), x.when(&s.Since), x.when(&s.Until))
		if len(s.Slots) == 0 {
			fmt.Fprintln(x.stdout, "  no slots in this window")
			return exitOK
		}
		tw := x.table()
		fmt.Fprintln(tw, "SLOT\tOUTCOME\tRUN\tRUNS\tREASON")
		for _, sl := range s.Slots {
			run := "-"
			if sl.RunID != nil {
				run = strconv.FormatInt(*sl.RunID, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", x.when(&sl.ScheduledAt), sl.Outcome, run, sl.Runs, oneLine(deref(sl.Reason), 60))
		}
		tw.Flush()
		counts := make([]string, 0, len(s.Counts))
		for _, k := range slices.Sorted(maps.Keys(s.Counts)) {
			counts = append(counts, fmt.Sprintf("%d %s", s.Counts[k], k))
		}
		fmt.Fprintf(x.stdout, "%d slot(s): %s\n", len(s.Slots), strings.Join(counts, ", "))
		return exitOK
	}
}

func notificationsFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	limit := fs.Int("limit", 20, "how many messages, newest first (1-500)")
	return func(ctx context.Context, x *cli, args []string) int {
		n, err := x.c.ListNotifications(ctx, args[0], *limit)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(n)
		}
		// The rules come with the job: what it notifies of, and where.
		if j, err := x.c.GetJob(ctx, args[0]); err == nil {
			rules := notifyRules(j.Definition)
			if len(rules) == 0 {
				fmt.Fprintf(x.stdout, "%s%s has no notify rules (notify: in its definition)\n", args[0], x.inNamespace())
			} else {
				fmt.Fprintf(x.stdout, "rules of %s%s:\n", args[0], x.inNamespace())
				for _, r := range rules {
					fmt.Fprintf(x.stdout, "  %s\n", r)
				}
			}
		}
		if len(n.Waiting) > 0 {
			fmt.Fprintf(x.stdout, "\nwaiting for their rule's interval: %d event(s)\n", len(n.Waiting))
			tw := x.table()
			fmt.Fprintln(tw, "EVENT\tRUN\tSLOT\tSINCE\tDETAIL")
			for _, w := range n.Waiting {
				run := "-"
				if w.RunID != nil {
					run = strconv.FormatInt(*w.RunID, 10)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Event, run, x.when(w.ScheduledAt), x.when(&w.CreatedAt), oneLine(deref(w.Detail), 50))
			}
			tw.Flush()
		}
		fmt.Fprintln(x.stdout)
		if len(n.Notifications) == 0 {
			fmt.Fprintln(x.stdout, "no messages sent yet")
			return exitOK
		}
		tw := x.table()
		fmt.Fprintln(tw, "ID\tEVENT\tDESTINATION\tSTATUS\tATTEMPTS\tRUNS\tCREATED\tSENT\tERROR")
		for _, m := range n.Notifications {
			runs := make([]string, len(m.Runs))
			for i, r := range m.Runs {
				runs[i] = strconv.FormatInt(r, 10)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.ID, m.Event, oneLine(m.Destination, 40), m.Status, m.Attempts,
				orDash(strings.Join(runs, ",")), x.when(&m.CreatedAt), x.when(m.SentAt), oneLine(deref(m.Error), 50))
		}
		tw.Flush()
		return exitOK
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// notifyRules says each notify rule of a definition in words:
// "on failed, timed_out: webhook https://example.com/alerts (signed with ALERTS_KEY)".
func notifyRules(def []byte) []string {
	var d struct {
		Notify []struct {
			On      []string `json:"on"`
			Webhook *struct {
				URL           string `json:"url"`
				SigningSecret string `json:"signing_secret"`
			} `json:"webhook"`
			Slack *struct {
				URLSecret string `json:"url_secret"`
			} `json:"slack"`
		} `json:"notify"`
	}
	if len(def) == 0 || json.Unmarshal(def, &d) != nil {
		return nil
	}
	out := make([]string, 0, len(d.Notify))
	for _, r := range d.Notify {
		to := "nowhere"
		switch {
		case r.Webhook != nil && r.Webhook.SigningSecret != "":
			to = "webhook " + logging.RedactURL(r.Webhook.URL) + " (signed with secret " + r.Webhook.SigningSecret + ")"
		case r.Webhook != nil:
			to = "webhook " + logging.RedactURL(r.Webhook.URL) + " (unsigned)"
		case r.Slack != nil:
			to = "Slack (its URL in secret " + r.Slack.URLSecret + ")"
		}
		out = append(out, "on "+strings.Join(r.On, ", ")+": "+to)
	}
	return out
}
