package config

import (
	"net/url"
	"strings"
)

// publicURL reads SCHEDULER_PUBLIC_URL: an http or https URL without query or fragment,
// whose path (if any) prefixes the API's routes.
func publicURL(env *Env, httpAddr string) string {
	const name = "SCHEDULER_PUBLIC_URL"
	if env.String(name, "") == "" {
		// The default is not checked: a bad SCHEDULER_HTTP_ADDR is reported on its own.
		return "http://" + httpAddr
	}
	v := strings.TrimSuffix(env.String(name, ""), "/")
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		env.Fail(name, v, "the URL targets reach this scheduler's API at, such as https://scheduler.example.com")
	}
	return v
}
