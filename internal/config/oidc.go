package config

import (
	jobns "github.com/schedulerhq/scheduler/internal/namespace"

	"fmt"
	"net/url"
	"strings"
)

// OIDC is the configuration of sign-in with tokens from an OpenID Connect issuer, such as a
// Kubernetes projected service-account token. An empty Issuer turns it off.
type OIDC struct {
	// Issuer is the iss every token must carry (SCHEDULER_OIDC_ISSUER); its discovery
	// document is <Issuer>/.well-known/openid-configuration.
	Issuer string
	// Audience must be one of a token's aud (SCHEDULER_OIDC_AUDIENCE).
	Audience string
	// JWKSURL, when set, is where the signing keys are fetched, and discovery is skipped
	// (SCHEDULER_OIDC_JWKS_URL).
	JWKSURL string
	// Bindings map subjects to roles (SCHEDULER_OIDC_BINDINGS), in the order given.
	Bindings []OIDCBinding
}

// OIDCBinding grants Role on Namespace to every subject that Subject matches.
type OIDCBinding struct {
	// Subject is a glob over the whole sub claim: * matches any run of characters,
	// ':' included; every other character stands for itself.
	Subject string
	// Namespace is a DNS label, or * for every namespace.
	Namespace string
	// Role is one of RoleViewer, RoleEditor, RoleAdmin.
	Role string
}

// The roles a binding may grant.
const (
	RoleViewer = "viewer"
	RoleEditor = "editor"
	RoleAdmin  = "admin"
)

const (
	oidcIssuerVar   = "SCHEDULER_OIDC_ISSUER"
	oidcAudienceVar = "SCHEDULER_OIDC_AUDIENCE"
	oidcJWKSURLVar  = "SCHEDULER_OIDC_JWKS_URL"
	oidcBindingsVar = "SCHEDULER_OIDC_BINDINGS"
	bindingForm     = "comma-separated subject-glob=namespace:role such as system:serviceaccount:billing:*=billing:editor, " +
		"with namespace a DNS label or * (every namespace) and role one of viewer, editor, admin (admin only on *)"
)

// loadOIDC reads the SCHEDULER_OIDC_ variables. The issuer is what turns the feature on, so
// each of the others set without it is refused rather than ignored: an operator who set
// bindings expects them to work.
func loadOIDC(env *Env) OIDC {
	o := OIDC{
		Issuer:   env.String(oidcIssuerVar, ""),
		Audience: env.String(oidcAudienceVar, ""),
		JWKSURL:  env.String(oidcJWKSURLVar, ""),
	}
	if o.Issuer != "" {
		if problem := checkOIDCURL(o.Issuer); problem != "" {
			env.Fail(oidcIssuerVar, o.Issuer, "the issuer's URL, exactly as its tokens' iss claim has it, such as https://kubernetes.default.svc ("+problem+")")
		}
		if o.Audience == "" {
			// Without an audience check, any token of the issuer would do, including one
			// minted for another service.
			env.Fail(oidcAudienceVar, "", "the audience the scheduler's tokens are issued for, such as scheduler, because "+oidcIssuerVar+" is set")
		}
	}
	if o.JWKSURL != "" {
		if problem := checkOIDCURL(o.JWKSURL); problem != "" {
			env.Fail(oidcJWKSURLVar, o.JWKSURL, "the URL of the issuer's key set, such as https://kubernetes.default.svc/openid/v1/jwks ("+problem+")")
		}
	}
	o.Bindings = parseBindings(env, env.String(oidcBindingsVar, ""))

	if o.Issuer == "" {
		var without []string
		for _, name := range []string{oidcAudienceVar, oidcJWKSURLVar, oidcBindingsVar} {
			if env.String(name, "") != "" {
				without = append(without, name)
			}
		}
		verb := "are"
		if len(without) == 1 {
			verb = "is"
		}
		if len(without) > 0 {
			env.Fail(oidcIssuerVar, "", fmt.Sprintf("an issuer URL such as https://kubernetes.default.svc, because %s %s set (only used with an issuer)",
				strings.Join(without, " and "), verb))
		}
	}
	return o
}

// checkOIDCURL returns what is wrong with an issuer or key-set URL, or "". http is accepted
// so that a local issuer (a test or development one) can be used; https is for any other.
func checkOIDCURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "https" && u.Scheme != "http":
		return "the scheme must be https:// or http://"
	case u.Host == "":
		return "no host"
	case u.User != nil:
		return "no user or password may be given in it"
	case u.RawQuery != "" || u.Fragment != "":
		return "no query or fragment may be given in it"
	}
	return ""
}

// parseBindings reads SCHEDULER_OIDC_BINDINGS, recording each bad entry on env.
func parseBindings(env *Env, value string) []OIDCBinding {
	var bindings []OIDCBinding
	for _, entry := range strings.Split(value, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		b, problem := parseBinding(entry)
		if problem != "" {
			env.Fail(oidcBindingsVar, entry, bindingForm+" ("+problem+")")
			continue
		}
		bindings = append(bindings, b)
	}
	return bindings
}

// parseBinding reads one subject-glob=namespace:role. Subjects hold ':' (Kubernetes:
// system:serviceaccount:<namespace>:<name>) but never '=', so the entry is cut at its first
// '=', and the grant at its first ':' (neither a namespace nor a role holds one).
func parseBinding(entry string) (OIDCBinding, string) {
	subject, grant, ok := strings.Cut(entry, "=")
	if !ok {
		return OIDCBinding{}, "no '=' between the subject and the grant"
	}
	subject = strings.TrimSpace(subject)
	namespace, role, ok := strings.Cut(strings.TrimSpace(grant), ":")
	b := OIDCBinding{Subject: subject, Namespace: namespace, Role: role}
	switch {
	case subject == "":
		return b, "no subject before '='"
	case !printableASCII(subject) || strings.Contains(subject, " "):
		return b, "the subject holds a space or a character that is not printable ASCII"
	case !ok:
		return b, "no ':' between the namespace and the role"
	case namespace != "*" && !jobns.Valid(namespace):
		return b, fmt.Sprintf("namespace %q is neither * nor a DNS label of lower-case letters, digits and '-'", namespace)
	case role != RoleViewer && role != RoleEditor && role != RoleAdmin:
		return b, fmt.Sprintf("role %q is not one of viewer, editor, admin", role)
	case role == RoleAdmin && namespace != "*":
		return b, "admin is granted on every namespace or none: write *:admin"
	}
	return b, ""
}
