package audit

// EachItem is eachItem, for the tests of paging.
var EachItem = eachItem
