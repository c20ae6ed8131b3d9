package oauth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/reqid"
)

// Config configures a Server. Zero tunables take the defaults below.
type Config struct {
	Issuer  string // control's public base URL, e.g. https://198.51.100.10
	Backend Backend
	Store   GrantStore
	Logger  *slog.Logger
	Now     func() time.Time // nil: time.Now

	CodeTTL        time.Duration // authorization code lifetime; default 2m, at most 10m
	DeviceCodeTTL  time.Duration // device code lifetime; default 10m, at most 1h
	DeviceInterval time.Duration // minimum between device token polls; default 5s
	PageTTL        time.Duration // how long a login page may be submitted; default 15m

	// Slow-down of wrong passwords (see throttle.go). After UserFailures
	// wrong passwords for one user, or AddrFailures from one source address,
	// each further attempt within FailureDelay (doubling per failure, up to
	// MaxFailureDelay) of the last failure is refused without checking the
	// password. Defaults: 5, 20, 1s, 5m.
	UserFailures    int
	AddrFailures    int
	FailureDelay    time.Duration
	MaxFailureDelay time.Duration

	// POST /oauth/device/code takes anyone's request: each source address
	// gets DeviceCodesPerAddr codes per DeviceCodeWindow (then 429 with
	// Retry-After), and at most MaxPendingDevices codes are pending at once.
	// Defaults: 20 per 10m, 10,000.
	DeviceCodesPerAddr int
	DeviceCodeWindow   time.Duration
	MaxPendingDevices  int

	// Secret keys the login pages' CSRF tokens. Replicas behind one
	// address must share it (control takes it from the store); nil: 32
	// random bytes for this process.
	Secret []byte

	// Metrics counts sign-ins and refusals (control/metrics); nil: none.
	Metrics Metrics

	// Upstream, when set, is the identity provider the login page offers
	// ("Sign in with UpstreamName"); Backend must then be an
	// IdentityBackend too. The provider sends the browser back to
	// PathOIDCCallback.
	Upstream     Upstream
	UpstreamName string // shown on the button; "": "your identity provider"
}

// Metrics receives the sign-ins the token endpoint issues, by grant type,
// and the attempts refused, by reason (a fixed set of words, never who).
type Metrics interface {
	SignedIn(grant string)
	Refused(reason string)
}

type noMetrics struct{}

func (noMetrics) SignedIn(string) {}
func (noMetrics) Refused(string)  {}

// Server is the authorization server. It is safe for concurrent use.
type Server struct {
	cfg    Config
	issuer *url.URL
	log    *slog.Logger
	now    func() time.Time
	secret []byte
	pol    throttlePolicy
	mux    *http.ServeMux

	upstreamOrigin string // where the login form may send the browser on
}

// clients are the public clients control knows (no secrets: RFC 8252 §8.4).
var clients = map[string]string{
	api.ClientCLI:     "the RunOS CLI",
	api.ClientDesktop: "RunOS Desktop",
	api.ClientConsole: "the RunOS console",
}

// ConsoleCallback is where the console's sign-in comes back to, on
// control itself: the one redirect URI its client may use (control/console).
const ConsoleCallback = "/console/callback"

// New checks cfg, fills in defaults and returns a Server.
func New(cfg Config) (*Server, error) {
	iss, err := checkIssuer(cfg.Issuer)
	if err != nil {
		return nil, err
	}
	if cfg.Backend == nil || cfg.Store == nil {
		return nil, errors.New("oauth: Config needs a Backend and a Store")
	}
	setDefault(&cfg.CodeTTL, 2*time.Minute)
	setDefault(&cfg.DeviceCodeTTL, 10*time.Minute)
	setDefault(&cfg.DeviceInterval, 5*time.Second)
	setDefault(&cfg.PageTTL, 15*time.Minute)
	setDefault(&cfg.FailureDelay, time.Second)
	setDefault(&cfg.MaxFailureDelay, 5*time.Minute)
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.UserFailures <= 0 {
		cfg.UserFailures = 5
	}
	if cfg.AddrFailures <= 0 {
		cfg.AddrFailures = 20
	}
	setDefault(&cfg.DeviceCodeWindow, 10*time.Minute)
	if cfg.DeviceCodesPerAddr <= 0 {
		cfg.DeviceCodesPerAddr = 20
	}
	if cfg.MaxPendingDevices <= 0 {
		cfg.MaxPendingDevices = 10000
	}
	// The memory store keeps entries for at most two hours; longer
	// lifetimes would also make a stolen code worth more.
	if cfg.CodeTTL > 10*time.Minute {
		return nil, fmt.Errorf("oauth: CodeTTL %v is longer than the 10m an authorization code may live", cfg.CodeTTL)
	}
	if cfg.DeviceCodeTTL > time.Hour {
		return nil, fmt.Errorf("oauth: DeviceCodeTTL %v is longer than the 1h a device code may live", cfg.DeviceCodeTTL)
	}
	if cfg.DeviceInterval < time.Second || cfg.DeviceInterval%time.Second != 0 {
		return nil, fmt.Errorf("oauth: DeviceInterval %v must be whole seconds (RFC 8628 gives it in seconds)", cfg.DeviceInterval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	secret := cfg.Secret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	} else if len(secret) < 16 {
		return nil, errors.New("oauth: Secret must hold at least 16 bytes")
	}
	s := &Server{
		cfg:    cfg,
		issuer: iss,
		log:    cfg.Logger,
		now:    cfg.Now,
		secret: secret,
		pol: throttlePolicy{
			userFree: cfg.UserFailures,
			addrFree: cfg.AddrFailures,
			base:     cfg.FailureDelay,
			max:      cfg.MaxFailureDelay,
		},
	}
	mux := http.NewServeMux()
	if err := s.useUpstream(mux); err != nil {
		return nil, err
	}
	mux.HandleFunc("GET "+api.PathAuthorize, s.authorizePage)
	mux.HandleFunc("POST "+api.PathAuthorize, s.authorizeSubmit)
	mux.HandleFunc(api.PathToken, s.token)
	mux.HandleFunc(api.PathDeviceCode, s.deviceCode)
	mux.HandleFunc("GET "+api.PathDeviceVerify, s.devicePage)
	mux.HandleFunc("POST "+api.PathDeviceVerify, s.deviceSubmit)
	mux.HandleFunc("GET "+pathMetadata, s.metadata)
	s.mux = mux
	return s, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// checkIssuer accepts an http(s) base URL with no path, query or fragment
// (RFC 8414 §2), since the endpoints are served at fixed paths from its root.
// Whether plain HTTP may be served is runos-control's --insecure-http to
// decide; here either scheme is a well-formed issuer.
func checkIssuer(s string) (*url.URL, error) {
	base, err := api.ParseControlURL(s, true)
	if err != nil {
		return nil, fmt.Errorf("oauth: issuer: %w", err)
	}
	return url.Parse(base)
}

// Handler serves /oauth/* and /.well-known/oauth-authorization-server.
// Each request gets an id (control/reqid) unless an outer handler gave it one.
func (s *Server) Handler() http.Handler { return reqid.Handler(s.mux) }

func (s *Server) endpoint(path string) string { return s.issuer.String() + path }

const pathMetadata = "/.well-known/oauth-authorization-server"

// metadata is RFC 8414 §3.2.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.issuer.String(),
		"authorization_endpoint":                         s.endpoint(api.PathAuthorize),
		"token_endpoint":                                 s.endpoint(api.PathToken),
		"device_authorization_endpoint":                  s.endpoint(api.PathDeviceCode),
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{grantAuthorizationCode, grantDeviceCode},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"authorization_response_iss_parameter_supported": true,
	})
}
