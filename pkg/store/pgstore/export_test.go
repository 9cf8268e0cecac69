package pgstore

// Channel is channel, for the tests of package pgstore_test.
var Channel = channel
