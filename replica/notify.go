package replica

import (
	"context"
	"fmt"
	"strings"

	"github.com/schedulerhq/scheduler/internal/notify/deliver"
	"github.com/schedulerhq/scheduler/internal/outbound"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// buildNotifications makes the leader's delivery of the jobs' notifications, and refuses a
// built-in job's notification URL that the outbound guard refuses: its variable is the
// operator's, and a replica that could never send must say so at start, not at a failure.
func buildNotifications(c Config, guard *targets.Guard, src *secrets.Source, surfaces *outbound.Policy) (*deliver.Service, error) {
	var problems []string
	for _, j := range c.Jobs {
		for _, r := range j.Notify {
			if r.Webhook == nil {
				continue
			}
			if err := guard.CheckURL(r.Webhook.URL); err != nil {
				problems = append(problems, fmt.Sprintf("SCHEDULER_JOB_%s_NOTIFY_URL: %v",
					strings.ReplaceAll(strings.ToUpper(j.Name), "-", "_"), err))
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	public := c.Notifications.PublicURL
	if public == "" {
		public = "http://" + c.HTTPAddr
	}
	return deliver.New(deliver.Config{
		DB: c.DB,
		// A caller of their own, behind the same guard: notifications neither wait for the
		// jobs' calls' concurrency slots nor take them.
		Caller:    targets.NewCaller(targets.Config{Guard: guard}),
		Secret:    notifySecret(src),
		Guard:     surfaces.GuardFor,
		Interval:  c.Notifications.Interval,
		PublicURL: public,
		Metrics:   c.Metrics,
	}), nil
}

// notifySecret is the one lookup of the secrets notifications use (a webhook's signing
// secret, a Slack URL): the job's namespace's, as its calls see them, with the hosts each
// may go to.
func notifySecret(src *secrets.Source) deliver.SecretFunc {
	return func(ctx context.Context, ns, name string) (string, []string, error) {
		values, err := src.Resolve(ctx, ns, []string{name})
		if err != nil {
			return "", nil, err
		}
		v := values[name]
		return v.Value, v.AllowedHosts, nil
	}
}
