package pgengine

// Classify is classify, for the tests of the error kinds.
var Classify = classify
