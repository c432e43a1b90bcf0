module sonde.test/gohttp

go 1.19
