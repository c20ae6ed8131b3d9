package oauth

import (
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// Config configures a Server. Zero tunables take the defaults below.
type Config struct {
	Issuer  string // control's public base URL, e.g. https://198.51.100.10
	Backend Backend
	Store   GrantStore
	Logger  *slog.Logger
	Now     func() time.Time // nil: time.Now

	CodeTTL        time.Duration // authorization code lifetime; default 2m
	DeviceCodeTTL  time.Duration // device code lifetime; default 10m
	DeviceInterval time.Duration // minimum between device token polls; default 5s
}

// Server is the authorization server. It is safe for concurrent use.
type Server struct {
	cfg Config
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	return nil, errors.New("oauth: New is not implemented yet")
}

// Handler serves /oauth/* and /.well-known/oauth-authorization-server.
func (s *Server) Handler() http.Handler {
	return http.NotFoundHandler()
}
