package docs_test

// The packages the documentation's Go snippets import (snippets_test.go
// lists them by name), imported here so this module requires them and
// the snippets compile against the versions the repository uses.
import (
	_ "connectrpc.com/connect"
	_ "github.com/gin-gonic/gin"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/go-chi/chi/v5/middleware"
	_ "github.com/gofiber/fiber/v2"
	_ "github.com/gofiber/fiber/v2/middleware/recover"
	_ "github.com/labstack/echo/v4"
	_ "github.com/labstack/echo/v4/middleware"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/otlptranslator"
	_ "github.com/redis/go-redis/v9"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/exporters/prometheus"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/credentials/insecure"

	_ "github.com/ylcnfrht/resilience/adapters/chi"
	_ "github.com/ylcnfrht/resilience/adapters/connect"
	_ "github.com/ylcnfrht/resilience/adapters/echo"
	_ "github.com/ylcnfrht/resilience/adapters/fiber"
	_ "github.com/ylcnfrht/resilience/adapters/gin"
	_ "github.com/ylcnfrht/resilience/adapters/grpc"
	_ "github.com/ylcnfrht/resilience/core"
	_ "github.com/ylcnfrht/resilience/core/budget"
	_ "github.com/ylcnfrht/resilience/core/event"
	_ "github.com/ylcnfrht/resilience/core/inbound"
	_ "github.com/ylcnfrht/resilience/core/limit"
	_ "github.com/ylcnfrht/resilience/core/outbound"
	_ "github.com/ylcnfrht/resilience/core/property"
	_ "github.com/ylcnfrht/resilience/core/ratelimit"
	_ "github.com/ylcnfrht/resilience/core/retryafter"
	_ "github.com/ylcnfrht/resilience/core/throttle"
	_ "github.com/ylcnfrht/resilience/extensions/otel"
	_ "github.com/ylcnfrht/resilience/extensions/otel/promrules"
	_ "github.com/ylcnfrht/resilience/extensions/redis"
)
