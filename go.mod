module github.com/slurmdbd-exporter/slurmdbd_exporter

go 1.26.8

require (
	github.com/alecthomas/kong v1.17.0
	github.com/rs/zerolog v1.35.1
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/sys v0.29.0 // indirect
)
