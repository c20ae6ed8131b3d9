package auth

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/oauth2"
)

// SignInDevice runs the device-authorization grant (RFC 8628): it prints
// the verification URL and the code for the user to enter in a browser on
// any machine, then polls control at the interval it asks for until the
// user approves, denies, the code expires or ctx ends.
func (f *Flow) SignInDevice(ctx context.Context) (*Token, error) {
	conf, err := f.config()
	if err != nil {
		return nil, err
	}
	cctx := f.clientCtx(ctx)
	da, err := conf.DeviceAuth(cctx)
	if err != nil {
		return nil, fmt.Errorf("start a device sign-in at %s: %s", conf.Endpoint.DeviceAuthURL, describe(err))
	}
	fmt.Fprintf(f.out(), "To sign in, visit %s and enter the code %s\n", da.VerificationURI, da.UserCode)
	t, err := conf.DeviceAccessToken(cctx, da)
	if err != nil {
		var re *oauth2.RetrieveError
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("device sign-in stopped before it was approved: %w", ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			// DeviceAccessToken's own deadline: the code's expiry.
			return nil, fmt.Errorf("the code %s expired before it was approved; run the command again for a new one", da.UserCode)
		case errors.As(err, &re) && re.ErrorCode == "access_denied":
			return nil, errors.New("the sign-in was denied in the browser")
		case errors.As(err, &re) && re.ErrorCode == "expired_token":
			return nil, fmt.Errorf("the code %s expired before it was approved; run the command again for a new one", da.UserCode)
		}
		return nil, fmt.Errorf("device sign-in at %s: %s", conf.Endpoint.TokenURL, describe(err))
	}
	return token(t)
}
