/** @skein/sql */
export {}
