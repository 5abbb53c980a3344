// A real OpenID provider for the OIDC authenticator's integration tests: zitadel/oidc's `op` package (the
// library behind ZITADEL's own provider) over the example storage of the same module, with the signing
// keys and the test clients of this file. It serves, over HTTPS on a loopback port:
//
//	/.well-known/openid-configuration   discovery
//	/keys                               the JWKS (the current signing key and every earlier one)
//	/oauth/token                        the token endpoint; the client_credentials grant issues JWT access
//	                                    tokens to the clients below (HTTP Basic client authentication)
//	POST /test/rotate?alg=RS256|ES256   test only: a new signing key (new kid) signs from now on; the
//	                                    earlier keys stay published unless &drop=1
//	/device_authorization               the device authorization grant (RFC 8628) for the public client
//	                                    falcon-cli, as `falcon login` uses it
//	POST /test/approve?user_code=CODE   test only: the user approves the device code (as user id1)
//	POST /test/deny?user_code=CODE      test only: the user refuses it
//
// Clients (id / secret: audience, lifetime, claims):
//
//	falcon-cli (public, device grant):  the id_token's aud [falcon-cli], 5 min, the approving user's claims
//	                                    (the example user id1: email test-user@zitadel.ch)
//
//	falcon-test / falcon-test-secret:   aud [falcon], 5 min, email robot@example.test, groups [falcon-admins team-a]
//	other-audience / other-secret:      aud [not-falcon], 5 min
//	short-lived / short-secret:         aud [falcon], 2 s
//
// Usage: oidc-provider --dir=DIR. It listens on 127.0.0.1 on a free port and, once serving, writes DIR/ca.pem
// (its self-signed serving certificate) and then DIR/issuer (the issuer URL, https://127.0.0.1:PORT).
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

type signingKey struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *signingKey) Key() any                                    { return k.priv }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return p.k.priv.Public() }

func newKey(alg jose.SignatureAlgorithm) (*signingKey, error) {
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, fmt.Errorf("unsupported alg %q (RS256 or ES256)", alg)
	}
	if err != nil {
		return nil, err
	}
	return &signingKey{id: uuid.NewString(), alg: alg, priv: priv}, nil
}

type testClient struct {
	id, secret string
	audience   []string
	lifetime   time.Duration
	claims     map[string]any
}

func (c *testClient) GetID() string                       { return c.id }
func (c *testClient) RedirectURIs() []string              { return nil }
func (c *testClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *testClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *testClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *testClient) ResponseTypes() []oidc.ResponseType  { return nil }
func (c *testClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c *testClient) LoginURL(string) string              { return "" }
func (c *testClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *testClient) IDTokenLifetime() time.Duration      { return c.lifetime }
func (c *testClient) DevMode() bool                       { return false }
func (c *testClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *testClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *testClient) IsScopeAllowed(string) bool           { return true }
func (c *testClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *testClient) ClockSkew() time.Duration             { return 0 }

var testClients = []*testClient{
	{id: "falcon-test", secret: "falcon-test-secret", audience: []string{"falcon"}, lifetime: 5 * time.Minute,
		claims: map[string]any{"email": "robot@example.test", "email_verified": true,
			"groups": []string{"falcon-admins", "team-a"}}},
	{id: "other-audience", secret: "other-secret", audience: []string{"not-falcon"}, lifetime: 5 * time.Minute,
		claims: map[string]any{"email": "other@example.test"}},
	{id: "short-lived", secret: "short-secret", audience: []string{"falcon"}, lifetime: 2 * time.Second,
		claims: map[string]any{"email": "short@example.test"}},
}

// deviceClient is the CLI's public client: the device grant (and refresh tokens), no secret.
type deviceClient struct{ *testClient }

func (c *deviceClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *deviceClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *deviceClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeDeviceCode, oidc.GrantTypeRefreshToken}
}
func (c *deviceClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }

// The id_token carries the user's claims (email) even though an access token is issued with it.
func (c *deviceClient) IDTokenUserinfoClaimsAssertion() bool { return true }

var cliClient = &deviceClient{&testClient{id: "falcon-cli", lifetime: 5 * time.Minute}}

// testStorage is the example storage with this program's keys and clients: everything the
// client_credentials grant and discovery touch is overridden here.
type testStorage struct {
	*storage.Storage
	mu      sync.Mutex
	current *signingKey
	keys    []*signingKey // every published key, current included
	clients map[string]*testClient
}

func (s *testStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current, nil
}

func (s *testStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256, jose.ES256}, nil
}

func (s *testStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, publicKey{k})
	}
	return out, nil
}

func (s *testStorage) rotate(alg jose.SignatureAlgorithm, drop bool) (*signingKey, error) {
	k, err := newKey(alg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if drop {
		s.keys = nil
	}
	s.current = k
	s.keys = append(s.keys, k)
	return k, nil
}

func (s *testStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok || c.secret != secret {
		return nil, errors.New("wrong client id or secret")
	}
	return c, nil
}

func (s *testStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("unknown client")
	}
	return &oidc.JWTTokenRequest{Subject: c.id, Audience: c.audience, Scopes: scopes}, nil
}

// CreateAccessToken gives each client's tokens its own lifetime (the subject is the client id).
func (s *testStorage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	lifetime := 5 * time.Minute
	if c, ok := s.clients[req.GetSubject()]; ok {
		lifetime = c.lifetime
	}
	return uuid.NewString(), time.Now().Add(lifetime), nil
}

func (s *testStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if id == cliClient.id {
		return cliClient, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

func (s *testStorage) GetPrivateClaimsFromScopes(_ context.Context, _, clientID string, _ []string) (map[string]any, error) {
	if c, ok := s.clients[clientID]; ok {
		return c.claims, nil
	}
	return nil, nil
}

// selfSigned makes the serving certificate (ECDSA P-256, for 127.0.0.1 and localhost) and its PEM.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "falcon-test-oidc-provider"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func main() {
	dir := flag.String("dir", "", "directory for ca.pem and issuer (required)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("oidc-provider: --dir is required")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("oidc-provider: listen: %v", err)
	}
	issuer := fmt.Sprintf("https://127.0.0.1:%d", lis.Addr().(*net.TCPAddr).Port)

	first, err := newKey(jose.RS256)
	if err != nil {
		log.Fatalf("oidc-provider: key: %v", err)
	}
	// The example storage keeps device codes only for clients it knows; the client itself is cliClient
	// (testStorage.GetClientByClientID).
	storage.RegisterClients(storage.NativeClient(cliClient.id))
	st := &testStorage{
		Storage: storage.NewStorage(storage.NewUserStore(issuer)),
		current: first,
		keys:    []*signingKey{first},
		clients: map[string]*testClient{},
	}
	for _, c := range testClients {
		st.clients[c.id] = c
	}
	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		log.Fatalf("oidc-provider: random: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	provider, err := op.NewProvider(&op.Config{CryptoKey: cryptoKey, CryptoKeyId: "falcon-test",
		DeviceAuthorization: op.DeviceAuthorizationConfig{Lifetime: 5 * time.Minute, PollInterval: time.Second,
			UserFormPath: "/device", UserCode: op.UserCodeBase20}}, st,
		op.StaticIssuer(issuer), op.WithLogger(logger))
	if err != nil {
		log.Fatalf("oidc-provider: provider: %v", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/test/rotate", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		alg := jose.SignatureAlgorithm(r.URL.Query().Get("alg"))
		if alg == "" {
			alg = jose.RS256
		}
		k, err := st.rotate(alg, r.URL.Query().Get("drop") == "1")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"kid": k.id, "alg": string(k.alg)})
	})
	// The user's answer on the verification page, as a test drives it.
	device := func(approve bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				http.Error(w, "POST only", http.StatusMethodNotAllowed)
				return
			}
			code := r.URL.Query().Get("user_code")
			_, err := st.Storage.GetDeviceAuthorizationByUserCode(r.Context(), code)
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			if approve {
				err = st.Storage.CompleteDeviceAuthorization(r.Context(), code, "id1")
			} else {
				err = st.Storage.DenyDeviceAuthorization(r.Context(), code)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux.HandleFunc("/test/approve", device(true))
	mux.HandleFunc("/test/deny", device(false))
	mux.Handle("/", provider)

	cert, certPEM, err := selfSigned()
	if err != nil {
		log.Fatalf("oidc-provider: certificate: %v", err)
	}
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	if err := writeAtomic(filepath.Join(*dir, "ca.pem"), certPEM); err != nil {
		log.Fatalf("oidc-provider: %v", err)
	}
	go func() {
		if err := srv.ServeTLS(lis, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("oidc-provider: serve: %v", err)
		}
	}()
	if err := writeAtomic(filepath.Join(*dir, "issuer"), []byte(issuer+"\n")); err != nil {
		log.Fatalf("oidc-provider: %v", err)
	}
	logger.Info("serving", "issuer", issuer)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}
