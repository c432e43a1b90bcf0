module sonde.test/goworkload

go 1.19
